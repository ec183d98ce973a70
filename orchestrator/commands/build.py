"""``mltrain build WORKLOAD``: build (or find up to date) the workload's Docker image."""

from __future__ import annotations

import typer

from orchestrator.commands.common import registry
from orchestrator.config.locations import project_root
from orchestrator.output import Output
from orchestrator.runners.docker.engine import connect
from orchestrator.runners.docker.images import build_spec, ensure_image
from orchestrator.runners.docker.runner import default_base_image


def register(app: typer.Typer) -> None:
    app.command("build")(build)


def build(
    workload: str = typer.Argument(..., help="Workload name (a folder of workloads/)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Build even if an image of this content exists."),
    base_image: str = typer.Option(
        None, "--base-image", help="BASE_IMAGE build argument (default: the Dockerfile's, or $MLTRAIN_BASE_IMAGE)."
    ),
) -> None:
    """Build WORKLOAD's image; its tag is a hash of everything that goes in, so unchanged means no build."""
    out = Output()
    spec = build_spec(registry().get(workload), project_root(), base_image=base_image or default_base_image())
    image = ensure_image(connect(), spec, rebuild=rebuild, on_status=out.status)
    out.data(f"{image.tag} {image.image_id}")
