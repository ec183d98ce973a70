"""Build context and content-hash tag (no engine needed), and the build-log follower."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from orchestrator.config.workloads import Registry
from orchestrator.errors import ConfigError, RunnerError
from orchestrator.runners.docker.images import build_spec, content_hash, context_tar, follow_build, image_tag
from orchestrator.runners.docker.runner import container_argv

DOCKERFILE = "ARG BASE_IMAGE=example/base:1\nFROM ${BASE_IMAGE}\nCOPY workloads/ /workspace/workloads/\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with two workloads and shared package code under workloads/."""
    root = tmp_path / "project"
    for name in ("alpha", "beta"):
        folder = root / "workloads" / name
        folder.mkdir(parents=True)
        (folder / "workload.yaml").write_text(
            f"name: {name}\nmlperf_benchmark: unet3d\nrun: [bash, run_and_time.sh]\n"
            "quality: {metric: eval_accuracy, better: higher, target: 0.9, env: QUALITY_THRESHOLD}\n"
            "data: {cli: [python, -m, x]}\n"
            f"image: {{dockerfile: docker/{name}.Dockerfile}}\n"
        )
        (folder / "run_and_time.sh").write_text("#!/bin/bash\necho run\n")
        (folder / "run_and_time.sh").chmod(0o755)
        (folder / "train.py").write_text("print('train')\n")
    (root / "workloads" / "__init__.py").write_text("")
    (root / "workloads" / "README.md").write_text("contract\n")
    (root / "workloads" / "common").mkdir()
    (root / "workloads" / "common" / "util.py").write_text("X = 1\n")
    (root / "docker").mkdir()
    (root / "docker" / "alpha.Dockerfile").write_text(DOCKERFILE)
    (root / "docker" / "beta.Dockerfile").write_text(DOCKERFILE)
    return root


def _spec(project: Path, name: str = "alpha", base_image: str | None = None):
    return build_spec(Registry([project / "workloads"]).get(name), project, base_image=base_image)


def test_context_holds_the_workload_and_shared_code_only(project: Path):
    (project / "workloads" / "alpha" / "__pycache__").mkdir()
    (project / "workloads" / "alpha" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"x")
    (project / "workloads" / "alpha" / ".hidden").write_text("x")
    spec = _spec(project)
    names = [f.name for f in spec.files]
    assert names == [
        "workloads/__init__.py", "workloads/alpha/run_and_time.sh", "workloads/alpha/train.py",
        "workloads/alpha/workload.yaml", "workloads/common/util.py",
    ]
    assert spec.base_image == "example/base:1" and spec.build_args == {"BASE_IMAGE": "example/base:1"}
    with tarfile.open(fileobj=io.BytesIO(context_tar(spec))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "Dockerfile" in members and members["workloads/alpha/run_and_time.sh"].mode == 0o755
    assert members["workloads/alpha/train.py"].mode == 0o644 and members["workloads"].isdir()
    assert all(m.mtime == 0 and m.uid == 0 for m in members.values())


def test_tag_is_a_content_hash_that_moves_only_with_what_goes_in(project: Path):
    spec = _spec(project)
    digest = content_hash(spec, "sha256:base")
    assert image_tag(spec, digest) == f"mltrain/alpha:{digest[:16]}"
    assert content_hash(_spec(project), "sha256:base") == digest
    assert context_tar(_spec(project)) == context_tar(spec)  # reproducible bytes

    (project / "workloads" / "beta" / "train.py").write_text("print('other workload changed')\n")
    (project / "workloads" / "README.md").write_text("docs changed\n")
    assert content_hash(_spec(project), "sha256:base") == digest

    assert content_hash(spec, "sha256:newer-base") != digest
    assert content_hash(_spec(project, base_image="example/base:2"), "sha256:base") != digest
    (project / "workloads" / "alpha" / "train.py").write_text("print('changed')\n")
    changed = content_hash(_spec(project), "sha256:base")
    assert changed != digest
    (project / "workloads" / "alpha" / "train.py").write_text("print('train')\n")
    assert content_hash(_spec(project), "sha256:base") == digest
    (project / "workloads" / "alpha" / "train.py").chmod(0o755)
    assert content_hash(_spec(project), "sha256:base") != digest
    (project / "workloads" / "alpha" / "train.py").chmod(0o644)
    (project / "workloads" / "common" / "util.py").write_text("X = 2\n")
    assert content_hash(_spec(project), "sha256:base") != digest


def test_missing_dockerfile_or_base_is_a_config_error(project: Path):
    (project / "docker" / "alpha.Dockerfile").unlink()
    with pytest.raises(ConfigError, match="alpha.Dockerfile not found"):
        _spec(project)
    (project / "docker" / "beta.Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(ConfigError, match="no BASE_IMAGE"):
        _spec(project, "beta")
    assert _spec(project, "beta", base_image="x/y:1").base_image == "x/y:1"


def test_follow_build_streams_and_returns_the_image_id():
    seen: list[str] = []
    events = [
        {"stream": "Step 1/2 : FROM base\n"}, {"stream": " ---> abc\n"},
        {"status": "Pulling fs layer", "id": "l1"}, {"status": "Pulling fs layer", "id": "l1"},
        {"stream": "Step 2/2 : RUN make\n"}, {"stream": "building...\n"},
        {"aux": {"ID": "sha256:feed"}}, {"stream": "Successfully built feed\n"},
    ]
    assert follow_build(events, tag="t", base_image="base", base_present=True, on_status=seen.append) == "sha256:feed"
    assert seen == ["Step 1/2 : FROM base", " ---> abc", "l1: Pulling fs layer", "Step 2/2 : RUN make", "building...",
                    "Successfully built feed"]


def test_follow_build_failure_is_one_line_with_step_and_output():
    events = [
        {"stream": "Step 3/5 : RUN pip install nope\n"}, {"stream": " ---> Running in 1f\n"},
        {"stream": "ERROR: No matching distribution found for nope\n"},
        {"stream": "Removing intermediate container 1f\n"},
        {"error": "The command '/bin/sh -c pip install nope' returned a non-zero code: 1",
         "errorDetail": {"code": 1,
                         "message": "The command '/bin/sh -c pip install nope'\nreturned a non-zero code: 1"}},
    ]
    with pytest.raises(RunnerError) as caught:
        follow_build(events, tag="mltrain/x:1", base_image="b", base_present=True, on_status=lambda s: None)
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        "building mltrain/x:1 failed at Step 3/5 : RUN pip install nope: The command '/bin/sh -c pip install nope'"
        " returned a non-zero code: 1 (last output: ERROR: No matching distribution found for nope)"
    )


def test_container_argv_maps_workload_files_into_workspace(project: Path, tmp_path: Path):
    alpha = Registry([project / "workloads"]).get("alpha")
    assert container_argv(alpha) == ["bash", "workloads/alpha/run_and_time.sh"]
    other = alpha.model_copy(update={"run": ("python", "train.py", "--fast", "/etc/hostname", "missing.py")})
    assert container_argv(other) == ["python", "workloads/alpha/train.py", "--fast", "/etc/hostname", "missing.py"]


def test_real_dockerfiles_declare_a_pinned_base_and_the_entry_point():
    project = Path(__file__).resolve().parents[2]
    for name in ("unet3d", "resnet50"):
        text = (project / "docker" / f"{name}.Dockerfile").read_text()
        assert "ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.04-py3" in text
        assert f'ENTRYPOINT ["bash", "workloads/{name}/run_and_time.sh"]' in text
        assert "COPY workloads/ /workspace/workloads/" in text and "WORKDIR /workspace" in text
