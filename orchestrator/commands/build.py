"""``mltrain build WORKLOAD``: build (or find up to date) the workload's Docker image."""

from __future__ import annotations

import typer

from orchestrator.commands.common import JSON_OPTION, output, registry


def register(app: typer.Typer) -> None:
    app.command("build", short_help="Build a workload's image (tagged by a hash of its inputs).")(build)


def build(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="Workload name (a folder of workloads/)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Build even if an image of this content exists."),
    base_image: str = typer.Option(
        None, "--base-image", help="BASE_IMAGE build argument (default: the Dockerfile's, or $MLTRAIN_BASE_IMAGE)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build WORKLOAD's image; its tag is a hash of everything that goes in, so unchanged means no build."""
    from orchestrator.config.locations import project_files
    from orchestrator.runners.docker.engine import connect
    from orchestrator.runners.docker.images import build_spec, ensure_image
    from orchestrator.runners.docker.runner import check_base_image

    out = output(ctx)
    spec = build_spec(registry().get(workload), project_files(), base_image=check_base_image(base_image))
    image = ensure_image(connect(), spec, rebuild=rebuild, on_status=out.status)
    if as_json:
        out.json({"tag": image.tag, "id": image.image_id, "content_hash": image.content_hash,
                  "reused": image.reused, "base_image": image.base_image, "base_image_id": image.base_image_id})
    else:
        out.data(f"{image.tag} {image.image_id}")
