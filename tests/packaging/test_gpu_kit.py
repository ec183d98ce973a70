"""tools/gpu_kit.py: the kit a GPU machine without a network installs from holds what that machine
lacks and fits what may be carried (60 MiB); it is made from a fresh clone, offline from a folder
of wheels; its reference comes from a local repository, checked before anything is downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.installs import PROJECT, run, user_env

KIT = PROJECT / "tools" / "gpu_kit.py"


def kit(args: list[str], *, cwd: Path = PROJECT, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess:
    return run([sys.executable, str(cwd / "tools" / "gpu_kit.py"), *args], cwd=cwd, check=False, timeout=timeout,
               env=env or user_env(Path(sys.executable).parent))


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def reference_repository(folder: Path) -> Path:
    """The real mlcommons/training where $MLTRAIN_TRAINING_REFERENCE names a checkout or mirror of it; else
    a repository laid out like it (the kit copies the folder; it runs nothing of it)."""
    given = os.environ.get("MLTRAIN_TRAINING_REFERENCE")
    if given:
        return Path(given)
    pytorch = folder / "training" / "retired_benchmarks" / "unet3d" / "pytorch"
    (pytorch / "model").mkdir(parents=True)
    (pytorch / "model" / "unet3d.py").write_text("# stands in for the reference's model\n")
    (pytorch / "runtime").mkdir()
    (pytorch / "runtime" / "inference.py").write_text("# stands in for the reference's inference\n")
    git("init", "-q", cwd=folder / "training")
    git("add", "-A", cwd=folder / "training")
    git("commit", "-qm", "reference", cwd=folder / "training")
    return folder / "training"


def fake_wheel(folder: Path, name: str, version: str, requires: list[str] = (), size: int = 0) -> Path:
    """A pure-Python wheel pip accepts from --find-links: its METADATA's Requires-Dist, and ``size`` bytes of
    incompressible payload."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    metadata = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
        name, version, "".join(f"Requires-Dist: {r}\n" for r in requires))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}.dist-info/METADATA", metadata)
        archive.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{dist}.dist-info/RECORD", "")
        if size:
            archive.writestr(f"{name.replace('-', '_')}/blob.bin", os.urandom(size))
    return path


@pytest.fixture()
def fake_project(tmp_path: Path, monkeypatch) -> tuple[Path, object]:
    """The kit's module with the project's requirements replaced by a small tree of fake wheels."""
    sys.path.insert(0, str(PROJECT / "tools"))
    try:
        import gpu_kit
    finally:
        sys.path.pop(0)
    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    fake_wheel(wheels, "app-core", "1.0", ["leaf>=2", "held-lib>=1", "extra-lib; extra == 'fast'",
                                           "py311-only; python_version < '3.12'", "nvidia-ml-py",
                                           "nvidia-cublas-cu12", "nvidia-nccl-cu12"])
    fake_wheel(wheels, "nvidia-ml-py", "13.0")  # NVML's bindings travel; CUDA's libraries never do
    fake_wheel(wheels, "nvidia-cublas-cu12", "12.0")
    fake_wheel(wheels, "nvidia-nccl-cu12", "2.0")
    fake_wheel(wheels, "leaf", "2.0")
    fake_wheel(wheels, "leaf", "3.0")
    fake_wheel(wheels, "extra-lib", "1.0", ["pinner"])
    fake_wheel(wheels, "py311-only", "1.0")
    fake_wheel(wheels, "held-lib", "2.0")
    fake_wheel(wheels, "pinner", "1.0", ["leaf<3"])  # read after leaf 3.0 was taken: leaf is taken again
    fake_wheel(wheels, "big", "1.0", size=3 * 2**20)
    fake_wheel(wheels, "setuptools", "70.0")
    fake_wheel(wheels, "wheel", "0.44")
    roots = ["app-core[fast]", "setuptools>=68", "wheel"]
    monkeypatch.setattr(gpu_kit, "project_requirements",
                        lambda: [Requirement(r) for r in roots])
    return wheels, gpu_kit


def names(kit_dir: Path) -> set[str]:
    return {p.name.split("-")[0] for p in (kit_dir / "wheels").glob("*.whl")}


def test_the_kit_carries_what_the_target_lacks_with_markers_extras_and_late_pins(tmp_path, fake_project, capsys):
    wheels, gpu_kit = fake_project
    have = tmp_path / "have.txt"
    have.write_text("# python: 3.12\nheld-lib==2.0\nsetuptools==80.0\nwheel\n")
    assert gpu_kit.main(["--out", str(tmp_path / "kit"), "--have", str(have), "--wheels", str(wheels)]) == 0
    carried = names(tmp_path / "kit")
    # held-lib is on the target; py311-only's marker is false for 3.12; setuptools and wheel always travel
    assert carried == {"app_core", "leaf", "extra_lib", "pinner", "setuptools", "wheel", "nvidia_ml_py"}
    assert [p.name for p in (tmp_path / "kit" / "wheels").glob("leaf-*")] == ["leaf-2.0-py3-none-any.whl"]
    manifest = (tmp_path / "kit" / "MANIFEST.txt").read_text()
    assert "python: 3.12\n" in manifest and "held there, not carried: held-lib" in manifest
    assert "pyproject: " in manifest and "reference: none" in manifest
    # A held version below a requirement is carried after all.
    have.write_text("# python: 3.12\nheld-lib==0.5\n")
    assert gpu_kit.main(["--out", str(tmp_path / "kit2"), "--have", str(have), "--wheels", str(wheels)]) == 0
    assert "held_lib" in names(tmp_path / "kit2")


def test_a_kit_over_its_limit_is_refused_naming_the_largest_wheels_and_nothing_is_written(tmp_path, fake_project,
                                                                                           capsys, monkeypatch):
    wheels, gpu_kit = fake_project
    monkeypatch.setattr(gpu_kit, "project_requirements", lambda: [Requirement("big")])
    have = tmp_path / "have.txt"
    have.write_text("# python: 3.12\nsix\n")
    out = tmp_path / "kit"
    assert gpu_kit.main(["--out", str(out), "--have", str(have), "--wheels", str(wheels), "--limit-mib", "2"]) == 2
    *progress, err = capsys.readouterr().err.splitlines()  # a line per download round, then the refusal
    assert progress == ["gpu_kit: downloading 1 for CPython 3.12: big"]
    assert "over its 2 MiB limit; largest: big 3.0 MiB" in err and "--skip" in err
    assert not out.exists() and not list(tmp_path.glob(".gpukit-*"))


@pytest.mark.parametrize(("args", "words"), [
    (["--reference", "https://github.com/mlcommons/training"], "a URL; give a local checkout or bare mirror"),
    (["--reference", "/no/such/repo"], "no such folder"),
    (["--reference", "{tmp}/fifo"], "fifo: a FIFO, not a folder"),  # named as what it is, not "no such folder"
    (["--wheels", "/dev/null"], "--wheels /dev/null: a device, not a folder"),
    (["--python-version", "3.11"], "lists a Python 3.12: give the list read on the machine the kit is for"),
    (["--python-version", "three"], "give major.minor"),
    (["--have", "/no/such/list"], "--have /no/such/list: cannot read it"),
    (["--have", "/dev/zero"], "--have /dev/zero: cannot read it (a device, not a file)"),
    (["--have", "{tmp}/fifo"], "fifo: cannot read it (a FIFO, not a file)"),
    (["--have", "{tmp}"], "cannot read it (a folder, not a file)"),
    (["--have", "{tmp}/huge.txt"], "cannot read it (over 4 MiB: not a package list)"),
    (["--limit-mib", "nan"], "--limit-mib 'nan': give a positive number of MiB"),
    (["--limit-mib", "inf"], "--limit-mib 'inf': give a positive number of MiB"),
    (["--limit-mib", "0"], "--limit-mib '0': give a positive number of MiB"),
    (["--limit-mib", "-5"], "--limit-mib '-5': give a positive number of MiB"),
    (["--limit-mib", "sixty"], "--limit-mib 'sixty': give a positive number of MiB"),
    (["--skip", "*"], "--skip '*' leaves out setuptools, wheel, always carried"),
    (["--skip", "pydantic,setup*"], "--skip 'setup*' leaves out setuptools, always carried"),
    (["--skip", "Wheel"], "--skip 'wheel' leaves out wheel, always carried"),
    (["--skip", "a b"], "--skip 'a b': not a package name"),
])
def test_bad_input_is_one_line_before_anything_is_downloaded(tmp_path, args, words):
    os.mkfifo(tmp_path / "fifo")  # reading it would block until a writer came
    with (tmp_path / "huge.txt").open("wb") as huge:
        huge.truncate(5 * 2**20)
    env = {**user_env(Path(sys.executable).parent), "PIP_INDEX_URL": "http://127.0.0.1:9/nothing"}  # nothing fetched
    done = kit(["--out", str(tmp_path / "kit"), *(a.replace("{tmp}", str(tmp_path)) for a in args)], env=env,
               timeout=120)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "kit").exists()


def user_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("what", ["user files", "a checkout", "a kit with a user's file", "a file"])
def test_a_kit_never_replaces_what_it_did_not_make(tmp_path, fake_project, capsys, what):
    """A folder of the user's, a project checkout (.git too), a kit beside which the user put a file: each is
    refused, one line, exit 2, before anything is downloaded, and left as it was."""
    wheels, gpu_kit = fake_project
    out = tmp_path / "out"
    if what == "a file":
        out.write_text("mine\n")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine\n")
    if what == "a checkout":
        git("init", "-q", cwd=out)
        git("add", "-A", cwd=out)
        git("commit", "-qm", "mine", cwd=out)
    if what == "a kit with a user's file":
        (out / "MANIFEST.txt").write_text("target: CPython 3.12 (cp312), manylinux x86_64\npython: 3.12\n")
        (out / "wheels").mkdir()
    before = user_files(tmp_path)
    have = tmp_path / "have.txt"
    have.write_text("# python: 3.12\nsix\n")
    assert gpu_kit.main(["--out", str(out), "--have", str(have), "--wheels", str(wheels)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu_kit: --out {out}: ") and err.count("\n") == 1, err
    assert "downloading" not in err
    assert user_files(tmp_path) == {**before, "have.txt": have.read_bytes()}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", "have.txt", "wheelhouse"])


def test_a_kit_is_not_made_in_the_current_folder_nor_the_project(tmp_path, fake_project, capsys, monkeypatch):
    wheels, gpu_kit = fake_project
    have = tmp_path / "have.txt"
    have.write_text("# python: 3.12\nsix\n")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)  # empty, and still not a place for a kit: a rename would take the folder we are in
    for out in (".", str(here), str(PROJECT), str(tmp_path)):
        assert gpu_kit.main(["--out", out, "--have", str(have), "--wheels", str(wheels)]) == 2
        err = capsys.readouterr().err
        assert "the current folder, the project or a folder holding them" in err and err.count("\n") == 1, err
    assert list(here.iterdir()) == [] and (PROJECT / ".git").exists()


def test_a_kit_goes_into_an_empty_folder_and_replaces_a_previous_kit(tmp_path, fake_project, capsys):
    wheels, gpu_kit = fake_project
    have = tmp_path / "have.txt"
    have.write_text("# python: 3.12\nheld-lib==2.0\n")
    out = tmp_path / "kit"
    out.mkdir()
    assert gpu_kit.main(["--out", str(out), "--have", str(have), "--wheels", str(wheels)]) == 0
    assert "held_lib" not in names(out)
    have.write_text("# python: 3.12\nsix\n")  # the target lacks held-lib now: a new kit in the old one's place
    assert gpu_kit.main(["--out", str(out), "--have", str(have), "--wheels", str(wheels)]) == 0
    assert "held_lib" in names(out) and "kit ready" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["have.txt", "kit", "wheelhouse"]  # nothing left aside


def test_a_repository_without_the_reference_is_refused_before_downloading(tmp_path):
    repo = tmp_path / "other"
    repo.mkdir()
    (repo / "README").write_text("not the training repository\n")
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    done = kit(["--out", str(tmp_path / "kit"), "--reference", str(repo)],
               env={**user_env(Path(sys.executable).parent), "PIP_INDEX_URL": "http://127.0.0.1:9/nothing"})
    assert done.returncode == 2 and "holds no retired_benchmarks/unet3d/pytorch/model/unet3d.py" in done.stderr


def test_the_kit_for_the_lent_gpu_machines_made_from_a_fresh_clone_offline_fits(tmp_path):
    """Online once (the wheels a fresh machine would download), then from a fresh clone with no index:
    the wheels from that folder alone, the reference from a bare mirror. Under 60 MiB."""
    reference = reference_repository(tmp_path)
    mirror = tmp_path / "training.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(reference), str(mirror)], check=True)
    online = kit(["--out", str(tmp_path / "online")])
    assert online.returncode == 0, online.stderr
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(PROJECT), str(clone)], check=True)
    for name in ("tools/gpu_kit.py", "tools/gpu_image.txt", "pyproject.toml"):  # this checkout's, committed or not
        (clone / name).write_bytes((PROJECT / name).read_bytes())
    offline_env = {**user_env(Path(sys.executable).parent), "PIP_INDEX_URL": "http://127.0.0.1:9/nothing",
                   "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}
    done = kit(["--out", str(clone / ".gpukit"), "--wheels", str(tmp_path / "online" / "wheels"),
                "--reference", str(mirror)], cwd=clone, env=offline_env)
    assert done.returncode == 0, done.stderr
    made = clone / ".gpukit"
    size = sum(p.stat().st_size for p in made.rglob("*") if p.is_file())
    assert size < 60 * 2**20, f"{size / 2**20:.1f} MiB"
    carried = names(made)
    assert {"pydantic", "mlperf_logging", "nibabel", "mlcommons_loadgen", "setuptools"} <= carried
    assert not {"torch", "numpy", "scipy", "onnxruntime", "opencv_python_headless", "pytest"} & carried  # the image's
    manifest = (made / "MANIFEST.txt").read_text()
    assert "python: 3.12\n" in manifest and "retired_benchmarks/unet3d/pytorch at " in manifest
    assert (made / "reference" / "unet3d" / "model" / "unet3d.py").is_file()
    assert names(tmp_path / "online") == carried
