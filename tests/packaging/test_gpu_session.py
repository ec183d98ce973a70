"""benchmarks/gpu_session.sh, the one command a borrowed GPU machine runs: it fits 480 s, refuses a
wrong kit before installing anything, and dry-runs here, with no network, on the interpreter a bare
machine has (torch and numpy, nothing else): the kit tools/gpu_kit.py makes is all it installs from,
every part runs its CPU form, and the summary table ends it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installs import PROJECT, SOURCES, make_venv, preinstalled, run, user_env

SESSION = PROJECT / "benchmarks" / "gpu_session.sh"
SUMMARY = PROJECT / "benchmarks" / "gpu_session_summary.py"


def checkout_copy(dest: Path) -> Path:
    """What travels to the GPU machine: the tracked sources, scripts and tests (no venv, no results)."""
    for name in (*SOURCES, "benchmarks", "tools", "tests", "qualify.yaml"):
        origin = PROJECT / name
        if origin.is_dir():
            shutil.copytree(origin, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, dest / name)
    return dest


def offline(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace of its own (no network at all) where this machine allows it."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n", *argv]
    return argv


def fake_kit(folder: Path, python: str = "3.12", pyproject: str | None = None) -> Path:
    (folder / "wheels").mkdir(parents=True)
    digest = pyproject or subprocess.run(["sha256sum", str(PROJECT / "pyproject.toml")], capture_output=True,
                                         text=True, check=True).stdout.split()[0]
    (folder / "MANIFEST.txt").write_text(f"target: CPython {python}\npython: {python}\npyproject: {digest}\n")
    return folder


def this_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def declared_parts() -> dict[str, int]:
    """The script's one list of parts and their default limits."""
    block = re.search(r"^PART_LIMITS=\((.*?)^\)", SESSION.read_text(), re.M | re.S).group(1)
    return {name: int(limit) for name, limit in re.findall(r"^\s*(\w+):(\d+)\s*$", block, re.M)}


def test_the_parts_limits_fit_one_command_of_480_s():
    """install + the seven parts, as their defaults in the script say, each part declared once with its function."""
    limits = declared_parts()
    assert set(limits) == {"install", "cuda_tests", "unet3d", "unet3d_variants", "llama31_8b", "resnet50", "qualify",
                           "inference"}
    assert sum(limits.values()) <= 480, limits
    functions = set(re.findall(r"^part_(\w+)\(\)", SESSION.read_text(), re.M))
    assert functions == set(limits)


def test_every_test_marked_cuda_is_in_a_module_the_session_collects():
    """The cuda_tests part collects tests/*/test_cuda.py alone: a cuda test anywhere else would never run."""
    marked = {path.relative_to(PROJECT).as_posix() for path in (PROJECT / "tests").rglob("*.py")
              if re.search(r"\bmark\.cuda\b|add_marker\(\s*[\"']cuda\b", path.read_text())}
    assert marked and all(re.fullmatch(r"tests/[^/]+/test_cuda\.py", name) for name in marked), sorted(marked)
    assert "tests/*/test_cuda.py -m cuda" in SESSION.read_text()


@pytest.mark.slow
def test_the_gpu_session_dry_runs_offline_from_its_kit_alone_to_its_summary_table(tmp_path: Path):
    bin_dir = make_venv(tmp_path / "bare", base=preinstalled(tmp_path / "machine", "torch", "numpy"))
    python = bin_dir / "python"
    project = checkout_copy(tmp_path / "project")
    env = user_env(bin_dir, XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path / "home"))
    version = run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                  cwd=tmp_path, env=env).stdout.strip()
    have = tmp_path / "have.txt"
    have.write_text(run([str(python), "-m", "pip", "list", "--format=freeze"], cwd=tmp_path, env=env).stdout)
    reference = os.environ.get("MLTRAIN_TRAINING_REFERENCE")  # a checkout or mirror of mlcommons/training
    kit = tmp_path / "kit"
    made = run([sys.executable, "tools/gpu_kit.py", "--out", str(kit), "--have", str(have), "--python-version",
                version, "--limit-mib", "400", *(["--reference", reference] if reference else [])],
               cwd=project, env=user_env(Path(sys.executable).parent), timeout=900)
    assert "kit ready" in made.stdout
    assert run([str(python), "-c", "import pydantic"], cwd=tmp_path, env=env, check=False).returncode != 0

    out = tmp_path / "out"
    parts = "install cuda_tests unet3d unet3d_variants llama31_8b resnet50 qualify inference" if reference else \
        "install cuda_tests llama31_8b resnet50 qualify inference"  # the unet3d parts need the reference
    session_env = {**env, "PYTHON": str(python), "KIT": str(kit), "OUT": str(out), "PARTS": parts,
                   "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull,
                   # The limits are a lent GPU's budget (test_the_parts_limits_fit_one_command_of_480_s); on
                   # a busy CPU host a part takes several times its GPU time: this test proves the session
                   # runs from its kit to its table, not that a CPU keeps a GPU's pace.
                   "LIMIT_INSTALL": "300",  # this bare venv installs ~50 wheels; the GPU image lacks ~11
                   **{f"LIMIT_{name.upper()}": "400" for name in parts.split() if name != "install"}}
    done = run(offline(["bash", "benchmarks/gpu_session.sh"]), cwd=project, timeout=900, check=False,
               env=session_env)
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, summary + (out / "session.log").read_text()[-4000:]
    table = summary[summary.index("mltrain GPU session"):]
    assert table in done.stdout  # printed at the end, as written
    rows = {line.split()[0]: line for line in table.splitlines() if line and not line.startswith(" ")}
    for name in parts.split():
        assert re.match(rf"{name}\s+ok\s+\d+ / \d+", rows[name]), table
    assert "every part ran and passed" in rows["total"]
    assert "skipped" in rows["cuda_tests"] and "PASS" in rows["qualify"] and "LoadGen" in rows["inference"]
    assert "images/s" in rows["resnet50"] and "tokens/s per device" in rows["llama31_8b"]
    assert "MFU unknown" in rows["llama31_8b"]  # no peak for a CPU
    produced = sorted(p.name for p in out.iterdir())
    assert len(produced) <= 8, produced  # what comes back from a lent machine
    for name in ("resnet50.json", "qualify.json", "inference.json", *(["unet3d.json"] if reference else [])):
        json.loads((out / name).read_text())
    assert (bin_dir / "mltrain").is_file()  # the entry point a user runs


def test_the_gpu_session_without_a_kit_says_how_to_make_one(tmp_path: Path):
    done = run(["bash", str(SESSION)], cwd=tmp_path, check=False,
               env={**user_env(Path(sys.executable).parent), "KIT": str(tmp_path / "nokit"),
                    "OUT": str(tmp_path / "out")})
    assert done.returncode == 2
    assert f"python3 tools/gpu_kit.py --out {tmp_path / 'nokit'} --python-version {this_python()} --reference" \
        in done.stderr


def test_a_kit_made_for_another_pyproject_is_refused(tmp_path: Path):
    """A kit made before a dependency was added would fail in pip's words, on the GPU machine's time."""
    kit = fake_kit(tmp_path / "kit", python=this_python(), pyproject="0" * 64)
    done = run(["bash", "benchmarks/gpu_session.sh"], cwd=PROJECT, check=False,
               env={**user_env(Path(sys.executable).parent), "KIT": str(kit), "OUT": str(tmp_path / "out")})
    assert done.returncode == 2
    assert "was made for another pyproject.toml: make it again" in done.stderr


def test_a_kit_for_another_python_is_refused_before_anything_is_installed(tmp_path: Path):
    kit = fake_kit(tmp_path / "kit", python="3.9")
    out = tmp_path / "out"
    done = run(["bash", "benchmarks/gpu_session.sh"], cwd=PROJECT, check=False,
               env={**user_env(Path(sys.executable).parent), "KIT": str(kit), "OUT": str(out),
                    "PYTHON": sys.executable})
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"is for Python 3.9, {sys.executable} is {this_python()}: make it again" in done.stderr
    assert not out.exists()  # nothing written, nothing installed


def session(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    kit = tmp_path / "kit"
    if not kit.exists():
        fake_kit(kit, python=this_python())
    return run(["bash", "benchmarks/gpu_session.sh"], cwd=PROJECT, check=False, timeout=120,
               env={**user_env(Path(sys.executable).parent), "KIT": str(kit), "OUT": str(tmp_path / "out"),
                    "PYTHON": sys.executable, **env})


@pytest.mark.parametrize(("env", "words"), [
    ({"PARTS": "bogus"}, "PARTS: no part 'bogus'; the parts: install cuda_tests unet3d"),
    ({"PARTS": "install qualifyy"}, "PARTS: no part 'qualifyy'"),
    ({"PARTS": " "}, "PARTS names no part"),
    ({"PARTS": "qualify $(>injected)"}, "PARTS: no part '$(>injected)'"),
    ({"LIMIT_QUALIFY": "0"}, "LIMIT_QUALIFY=0: give a whole number of seconds, at least 1"),
    ({"LIMIT_INSTALL": "ten"}, "LIMIT_INSTALL=ten: give a whole number of seconds"),
    ({"LIMIT_UNET3D_VARIANTS": ""}, "LIMIT_UNET3D_VARIANTS=: give a whole number of seconds"),
    ({"LIMIT_RESNET50": "-5"}, "LIMIT_RESNET50=-5: give a whole number of seconds"),
])
def test_an_unknown_part_or_a_limit_that_is_no_limit_is_refused_before_anything_runs(tmp_path: Path, env, words):
    done = session(tmp_path, **env)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "every part ran and passed" not in done.stdout
    assert not (tmp_path / "out").exists() and not (PROJECT / "injected").exists()


def test_a_refused_session_keeps_the_last_ones_results_and_never_writes_through_a_link(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.txt").write_text("the last session's table\n")
    (out / "session.log").write_text("the last session's log\n")
    done = session(tmp_path, PARTS="qualifyy")
    assert done.returncode == 2
    assert (out / "summary.txt").read_text() == "the last session's table\n"
    assert (out / "session.log").read_text() == "the last session's log\n"
    elsewhere = tmp_path / "precious.txt"
    elsewhere.write_text("not the session's\n")
    for name in ("summary.txt", "session.log", "qualify.json"):
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(elsewhere)
        done = session(tmp_path, PARTS="qualify")
        assert done.returncode == 2 and f"{out / name} is a link or not a file" in done.stderr, done.stderr
        assert elsewhere.read_text() == "not the session's\n"
        (out / name).unlink()
    os.mkfifo(out / "session.log")
    done = session(tmp_path, PARTS="qualify")
    assert done.returncode == 2 and "session.log is a link or not a file" in done.stderr


@pytest.mark.parametrize("where", ["a part", "the machine's description"])
def test_a_stopped_session_stops_its_running_part_and_removes_its_work_folder(tmp_path: Path, where: str):
    """The cuda_tests part stands in for any: its interpreter (a double of $PYTHON) sleeps in pytest's place.
    Stopped while it describes the machine (torch imported, a block whose output goes to a file), the
    stop is said on stderr all the same (before, it went into that file, deleted with the work folder)."""
    import signal
    import time

    started = tmp_path / "started"
    python = tmp_path / "python"
    describing = f"""if [[ "$*" == *torch.__version__* ]]; then echo "$$ $WORK" >{started}; sleep 2; exit 0; fi"""
    python.write_text(f"""#!/bin/bash
{describing if where != "a part" else ""}
if [[ "$1 $2" == "-m pytest" ]]; then echo "$$ $WORK" >{started}; exec sleep 300; fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    fake_kit(tmp_path / "kit", python=this_python())
    env = {**user_env(Path(sys.executable).parent), "KIT": str(tmp_path / "kit"), "OUT": str(tmp_path / "out"),
           "PYTHON": str(python), "PARTS": "cuda_tests qualify"}
    proc = subprocess.Popen(["bash", "benchmarks/gpu_session.sh"], cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (started.exists() and started.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the part never started"
        pid, work = started.read_text().split()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr and stderr.count("\n") == 1, stderr
    assert not Path(f"/proc/{pid}").exists() or "sleep" not in Path(f"/proc/{pid}/cmdline").read_text()
    assert not Path(work).exists()
    assert "stopped by SIGTERM" in (tmp_path / "out" / "summary.txt").read_text()
    assert "== " not in (tmp_path / "out" / "session.log").read_text().replace("== cuda_tests", "")  # none after


def test_the_summary_names_a_cut_part_a_missing_file_and_a_damaged_one_and_exits_1(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "qualify.json").write_text('{"verdict": "pass", "checks": [{"name": "gemm", "status": "pass"}]}')
    (out / "resnet50.json").write_text("{not json")
    (out / "unet3d_variants.json").write_text(json.dumps({
        "baseline": {"reference-amp": {"train_samples_per_s": 20.0}},
        "results": [{"name": "b7", "train_samples_per_s": 40.0, "eval_windows_per_s": 9.0,
                     "details": {"parity": {"loss_rel_diff": 1e-4, "logit_rel_diff": 0.01}}}],
        "skipped": [{"name": "b7-compile", "why": "stopped at the deadline after 80 s"}]}))
    parts = tmp_path / "parts.tsv"
    throughput = {"key": "throughput", "value": 3.5, "metadata": {
        "layers": 24, "seq_len": 8192, "precision": "bf16", "tokens_per_second_per_device": 28672.0,
        "model_tflops_per_device": 445.3, "mfu": 0.45}}
    (out / "session.log").write_text(f"== llama31_8b (limit 60s): bash -c do_llama31_8b\n"
                                     f":::MLLOG {json.dumps({**throughput, 'key': 'resolved_settings'})}\n"
                                     f":::MLLOG {json.dumps(throughput)}\n== resnet50 (limit 50s): ...\n"
                                     f":::MLLOG {json.dumps({**throughput, 'metadata': {}})}\n")
    parts.write_text("install\t0\t9\t25\nunet3d_variants\t124\t110\t110\nllama31_8b\t0\t40\t60\n"
                     "resnet50\t0\t30\t50\nqualify\t0\t20\t55\ninference\t0\t20\t45\n")
    env = tmp_path / "env.txt"
    env.write_text("date\npython 3.12.3 torch 2.11.0+cu130\n")
    done = run([sys.executable, str(SUMMARY), str(parts), str(out), str(env), "300"], cwd=tmp_path, check=False)
    assert done.returncode == 1, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line and not line.startswith(" ")}
    assert "cut at 110 s" in rows["unet3d_variants"] and "b7 40.0 (2.00x)" in rows["unet3d_variants"]
    assert "skipped b7-compile" in rows["unet3d_variants"]
    assert "(unreadable: JSONDecodeError" in rows["resnet50"] and "(no inference.json)" in rows["inference"]
    assert "PASS: gemm pass" in rows["qualify"]
    assert "24 layers x 8192 tokens, bf16: 28,672 tokens/s per device, 445 TFLOPS, MFU 0.45" in rows["llama31_8b"]
    assert "NOT every part ran and passed" in rows["total"] and "python 3.12.3" in done.stdout
