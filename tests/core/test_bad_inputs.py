"""Bad input at every entry, verb by verb: options, YAML, environment, stored files, logs.

Each case must end in exit 2 and one line naming what is wrong (no traceback, no "internal error"),
write nothing (the results folder, the report/export targets and the data cache are unchanged;
only `index.db`, the store's cache, which the first read of a store saves, may appear), and leave
the store listing its good run.

Hostile logs, imports and exports are here too (validated by `orchestrator.mlperf` and
`orchestrator.session.importing`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.hardware.stored_runs import fake_log, make_run

GOOD = "run-good"
INDEX_FILES = ("index.db", "index.db-journal")
"""The store's cache: a read saves the index it rebuilt (never a run's files)."""
FAKEBENCH = Path(__file__).resolve().parents[1] / "workloads" / "fakebench"


@dataclass(frozen=True)
class Sandbox:
    tmp: Path
    results: Path
    env: dict[str, str] = field(default_factory=dict)

    def sub(self, text: str) -> str:
        return text.replace("{R}", str(self.results)).replace("{T}", str(self.tmp))


Prepare = Callable[[Sandbox], None]


@dataclass(frozen=True)
class Bad:
    argv: tuple[str, ...]
    says: str
    """A piece of the one error line."""
    prepare: Prepare | None = None
    env: dict[str, str] = field(default_factory=dict)
    results_option: bool = True
    """Append --results {R}."""
    may_write: tuple[str, ...] = ()
    """Paths under the results folder that this case may write (a listing refreshes the cache)."""


# ---- what the cases prepare -------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _profiles(body: str) -> Prepare:
    def prepare(box: Sandbox) -> None:
        _write(box.tmp / "seeds.yaml", body)
        box.env["MLTRAIN_SEEDS_FILE"] = str(box.tmp / "seeds.yaml")

    return prepare


GOOD_PROFILE = "workloads:\n  {w}:\n    qualify: {{seeds: '1-3', timeout_minutes: 1, dataset: {{source: synthetic}}}}\n"


def _workload(yaml_text: str, name: str = "oddbench") -> Prepare:
    def prepare(box: Sandbox) -> None:
        folder = box.tmp / "workloads" / name
        _write(folder / "workload.yaml", yaml_text)
        _write(folder / "run.sh", "echo hi\n")
        _write(folder / "d.py", (FAKEBENCH / "dataset.py").read_text())
        box.env["MLTRAIN_WORKLOADS"] = os.pathsep.join([str(box.tmp / "workloads"), box.env["MLTRAIN_WORKLOADS"]])
        _profiles(GOOD_PROFILE.format(w=name))(box)

    return prepare


WORKLOAD_YAML = (
    "name: oddbench\nmlperf_benchmark: unet3d\nrun: {run}\n"
    "quality: {{metric: eval_accuracy, better: higher, target: 0.9, env: QUALITY_THRESHOLD}}\n"
    "data: {{cli: {data}}}\n"
)


def _alias_bomb(levels: int = 9) -> str:
    """A "billion laughs" YAML: each level an anchor of nine aliases of the one below."""
    lines = ["workloads:", "  fakebench:", "    qualify: {seeds: '1-3'}", "l0: &l0 [a, a, a, a, a, a, a, a, a]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _raw(name: str, data: bytes, env: str) -> Prepare:
    def prepare(box: Sandbox) -> None:
        (box.tmp / name).write_bytes(data)
        box.env[env] = str(box.tmp / name)

    return prepare


def _damage(relative: str, content: object) -> Prepare:
    def prepare(box: Sandbox) -> None:
        make_run(box.results, label="bad", seeds=[1, 2, 3], run_id="run-bad")
        path = box.results / "run-bad" / relative
        if relative == "manifest.json" and isinstance(content, dict) and content:  # one bad field in a good one
            data = {**json.loads(path.read_text()), **content}
        else:
            data = content
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        (box.results / "index.db").unlink(missing_ok=True)

    return prepare


def _damage_telemetry(change: Callable[[dict], object]) -> Prepare:
    """run-bad with seed 2's telemetry series changed in place by ``change``."""

    def prepare(box: Sandbox) -> None:
        make_run(box.results, label="bad", seeds=[1, 2, 3], run_id="run-bad", power_w=300.0)
        path = box.results / "run-bad" / "seeds" / "2" / "telemetry.json"
        series = json.loads(path.read_text())
        change(series)
        path.write_text(json.dumps(series))
        (box.results / "index.db").unlink(missing_ok=True)

    return prepare


def _outside_run(box: Sandbox) -> None:
    """A run folder that is a link to a run kept outside the results folder."""
    elsewhere = box.tmp / "elsewhere"
    make_run(elsewhere, label="x", seeds=[1, 2, 3], run_id="run-linked")
    (box.results / "run-linked").symlink_to(elsewhere / "run-linked")
    (box.results / "index.db").unlink(missing_ok=True)


def _outside_seed(box: Sandbox) -> None:
    """A seed folder of a stored run that is a link out of its run folder."""
    make_run(box.results, label="x", seeds=[1, 2, 3], run_id="run-seedlink")
    seed = box.results / "run-seedlink" / "seeds" / "2"
    seed.rename(box.tmp / "seed-2-elsewhere")
    seed.symlink_to(box.tmp / "seed-2-elsewhere")
    (box.results / "index.db").unlink(missing_ok=True)


def _run_of_one_seed(box: Sandbox) -> None:
    make_run(box.results, label="one", seeds=[1])
    (box.results / "index.db").unlink()


def _damage_decisions(**rule: object) -> Prepare:
    """run-bad with a decisions.json whose rule, valid in itself, has ``rule``'s fields."""
    good = {"mode": "width", "method": "test", "alpha": 0.05, "max_seeds": 4, "least_seeds": 4,
            "seed_order": [1, 2, 3, 4], "width": 0.05}
    return _damage("decisions.json", {"rule": {**good, **rule}})


def _link(name: str, target: str) -> Prepare:
    return lambda box: (box.tmp / name).symlink_to(box.sub(target))


def _a_file(name: str) -> Prepare:
    return lambda box: _write(box.tmp / name, "not a folder\n")


def _folder(name: str) -> Prepare:
    return lambda box: (box.tmp / name).mkdir(parents=True, exist_ok=True)


def _onnx_with_batch(name: str, batch: int) -> Prepare:
    """An ONNX model taking resnet50's input with a fixed batch axis of ``batch`` samples."""

    def prepare(box: Sandbox) -> None:
        import onnx
        from onnx import TensorProto, helper

        shape = [batch, 3, 224, 224]
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(box.tmp / name))

    return prepare


def _logs(lines_for: Callable[[int, str], str], names: tuple[str, ...] = ("result_0.txt", "result_1.txt")) -> Prepare:
    """A folder of fakebench logs to import, each passed through ``lines_for(n, log)``."""

    def prepare(box: Sandbox) -> None:
        for n, name in enumerate(names):
            _write(box.tmp / "logs" / name, lines_for(n, fake_log(n + 1, {})))

    return prepare


def _edit_event(key: str, change: Callable[[dict], None]) -> Callable[[int, str], str]:
    def edit(_n: int, log: str) -> str:
        out = []
        for line in log.splitlines():
            if line.startswith(":::MLLOG "):
                event = json.loads(line[len(":::MLLOG "):])
                if event["key"] == key:
                    change(event)
                    line = ":::MLLOG " + json.dumps(event)
            out.append(line)
        return "\n".join(out) + "\n"

    return edit


def _set(field_name: str, value: object) -> Callable[[dict], None]:
    def change(event: dict) -> None:
        if field_name.startswith("metadata."):
            event["metadata"][field_name.split(".", 1)[1]] = value
        else:
            event[field_name] = value

    return change


def _foreign_benchmark(box: Sandbox) -> None:
    manifest = box.results / GOOD / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "benchmark": "../../../escaped"}))
    (box.results / "index.db").unlink(missing_ok=True)


# ---- the table ----------------------------------------------------------------------------------

CASES: dict[str, Bad] = {
    # run: options
    "run unknown workload": Bad(("run", "nosuch"), "unknown workload 'nosuch'"),
    "run workload with a slash": Bad(("run", "../fakebench"), "unknown workload '../fakebench'"),
    "run seeds backwards": Bad(("run", "fakebench", "--seeds", "9-1"), "runs backwards"),
    "run seeds not a number": Bad(("run", "fakebench", "--seeds", "a"), "is not a seed or range"),
    "run seeds empty": Bad(("run", "fakebench", "--seeds", ""), "empty seed spec"),
    "run seeds blank": Bad(("run", "fakebench", "--seeds", "  "), "empty seed spec"),
    "run seeds repeat": Bad(("run", "fakebench", "--seeds", "1,1"), "given twice"),
    "run seeds overlap": Bad(("run", "fakebench", "--seeds", "1-5,3"), "given twice"),
    "run seeds negative": Bad(("run", "fakebench", "--seeds", "-1"), "is not a seed or range"),
    "run seed too large": Bad(("run", "fakebench", "--seeds", "99999999999"), "at most 2147483647"),
    "run one range too long": Bad(("run", "fakebench", "--seeds", "1-99999"), "more than 10000"),
    "run too many seeds in all": Bad(("run", "fakebench", "--seeds", ",".join(f"{i}0000-{i}9999" for i in range(1, 4))),
                                     "more than 10000 seeds in all"),
    "run random zero": Bad(("run", "fakebench", "--seeds", "random:0"), "random:N needs"),
    "run random too many": Bad(("run", "fakebench", "--seeds", "random:100000"), "random:N needs"),
    "run data folder missing": Bad(("run", "fakebench", "--data", "/nonexistent/kits19"),
                                   "data folder /nonexistent/kits19: no such folder"),
    # a folder given as input that is something else is named as what it is, never "does not exist"
    "run data is a file": Bad(("run", "fakebench", "--data", "{T}/afile"), "afile: a file, not a folder",
                              prepare=_a_file("afile")),
    "run data is a device": Bad(("run", "fakebench", "--data", "/dev/null"),
                                "/dev/null: a character device, not a folder"),
    "run data fails the check": Bad(("run", "fakebench", "--data", "{T}/empty"), "cases.json missing",
                                    prepare=_folder("empty")),
    "run unknown profile": Bad(("run", "fakebench", "--profile", "fast"), "'fast' is not one of"),
    "run unknown runner": Bad(("run", "fakebench", "--runner", "cloud"), "'cloud' is not one of"),
    "run unknown ipc": Bad(("run", "fakebench", "--ipc", "shared"), "'shared' is not one of"),
    "run options of other runners": Bad(
        ("run", "fakebench", "--runner", "local", "--partition", "gpu", "--shm-size", "2g", "--ipc", "private",
         "--base-image", "foo:1", "--drop-caches"),
        "--drop-caches is for the docker runner; --shm-size, --ipc, --base-image are for the docker or slurm-docker"
        " runner; --partition is for the slurm or slurm-docker runner: this command runs on the local runner; drop"
        " them, or pick the runner with --runner"),
    "run a docker option locally": Bad(("run", "fakebench", "--runner", "local", "--rebuild"),
                                        "--rebuild is for the docker or slurm-docker runner: this command runs on"),
    "qualify a docker option locally": Bad(("qualify", "--base-image", "foo:1"),
                                           "--base-image is for the docker or slurm-docker runner: this command"),
    "run label with a newline": Bad(("run", "fakebench", "--label", "a\nb"), "--label"),
    "run empty label": Bad(("run", "fakebench", "--label", ""), "--label"),
    "run retry-failed without resume": Bad(("run", "fakebench", "--retry-failed"), "--retry-failed"),
    "run docker bad gpus": Bad(("run", "fakebench", "--runner", "docker", "--gpus", "some"), "--gpus 'some'"),
    "run gpus count beyond any node": Bad(("run", "fakebench", "--gpus", "99999"), "more GPUs than a job can have"),
    "run gpus repeated device": Bad(("run", "fakebench", "--gpus", "0,0"), "give each device once"),
    "run data cache is a file": Bad(("run", "fakebench"), "data cache", prepare=_a_file("cachefile"),
                                    env={"XDG_CACHE_HOME": "{T}/cachefile"}),
    "run data cache under a file": Bad(("run", "fakebench"), "is not a folder", prepare=_a_file("cachefile"),
                                       env={"XDG_CACHE_HOME": "{T}/cachefile/deeper"}),
    "run docker bad shm size": Bad(("run", "fakebench", "--runner", "docker", "--shm-size", "lots"), "--shm-size"),
    "run docker base image with a space": Bad(("run", "fakebench", "--runner", "docker", "--base-image", "a b"),
                                              "--base-image"),
    "run slurm gpus it cannot express": Bad(("run", "fakebench", "--runner", "slurm", "--gpus", "all"),
                                            "none or a GPU count"),
    "run slurm partition with a newline": Bad(
        ("run", "fakebench", "--runner", "slurm", "--partition", "debug\n#SBATCH --wrap=id"), "--partition"),
    "run slurm partition with a space": Bad(("run", "fakebench", "--runner", "slurm", "--partition", "a b"),
                                            "--partition"),
    "run slurm results path with a newline": Bad(
        ("run", "fakebench", "--runner", "slurm", "--results", "{T}/r\necho pwned"), "control character",
        results_option=False),
    # run: a run that decides its own seed count
    "run until-decided without against": Bad(("run", "fakebench", "--until-decided"), "needs --against RUN|LABEL"),
    "run against without until-decided": Bad(("run", "fakebench", "--against", "good"),
                                              "--against goes with --until-decided or --seeds auto"),
    "run against naming nothing": Bad(("run", "fakebench", "--until-decided", "--against", "nosuch"),
                                      "--against 'nosuch': no run and no label 'nosuch'"),
    "run against an empty name": Bad(("run", "fakebench", "--until-decided", "--against", ""),
                                     "--against '': no run and no label ''"),
    "run against a run of one seed": Bad(("run", "fakebench", "--until-decided", "--against", "one"),
                                         "a comparison needs at least 2",
                                         prepare=_run_of_one_seed),
    "run against its own label": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--label", "good"),
                                     "is the label this run gets"),
    "run against another workload's run": Bad(("run", "oddbench", "--until-decided", "--against", GOOD),
                                              "is a fakebench run, not oddbench", prepare=_workload(
                                                  WORKLOAD_YAML.format(run="[bash, run.sh]", data="[python3, d.py]"))),
    "run until-decided with seeds": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--seeds", "1-5"),
                                        "drop --seeds"),
    "run margin nan": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--margin", "nan"),
                          "--margin nan: give a finite percent"),
    "run margin infinite": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--margin", "inf"),
                               "--margin inf: give a finite percent"),
    "run margin zero": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--margin", "0"),
                           "--margin 0: give a finite percent above 0"),
    "run margin negative": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--margin=-3"),
                               "--margin -3: give a finite percent above 0"),
    "run margin a word": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--margin", "some"),
                             "--margin"),
    "run max-seeds below what the rule needs": Bad(
        ("run", "fakebench", "--until-decided", "--against", "good", "--max-seeds", "3"),
        "--max-seeds 3: the rule cannot decide before 4 seeds"),
    "run max-seeds zero": Bad(("run", "fakebench", "--seeds", "auto", "--max-seeds", "0"), "--max-seeds 0: give 1 to"),
    "run seeds auto with against": Bad(("run", "fakebench", "--seeds", "auto", "--against", "good"),
                                       "--seeds auto measures one setup"),
    "run seeds auto width nan": Bad(("run", "fakebench", "--seeds", "auto", "--width", "nan"), "--width nan"),
    "run width with until-decided": Bad(("run", "fakebench", "--until-decided", "--against", "good", "--width", "5"),
                                        "--width goes with --seeds auto"),
    "run seeds auto under a fixed run count": Bad(("run", "fakebench", "--seeds", "auto", "--profile", "mlperf"),
                                                  "the mlperf profile needs exactly 40 runs"),
    "resume with until-decided": Bad(("run", "fakebench", "--resume", GOOD, "--until-decided", "--against", "good"),
                                     "--resume goes on under the run's own seed rule"),
    # run --resume
    "resume unknown run": Bad(("run", "fakebench", "--resume", "nosuch"), "no run 'nosuch'"),
    "resume a path": Bad(("run", "fakebench", "--resume", "../../etc"), "bad run id"),
    "resume with new seeds": Bad(("run", "fakebench", "--resume", GOOD, "--seeds", "1-3"), "drop --seeds"),
    "resume with a profile": Bad(("run", "fakebench", "--resume", GOOD, "--profile", "smoke"), "drop --seeds"),
    "resume another workload's run": Bad(("run", "unet3d", "--resume", GOOD), "is a fakebench run, not unet3d"),
    "resume a damaged run": Bad(("run", "fakebench", "--resume", "run-bad"), "field state",
                                prepare=_damage("seeds/2/state.json", {"seed": 2, "state": "exploded"})),
    # run: configuration files and environment
    "profiles file missing": Bad(("run", "fakebench"), "profile file not found",
                                 env={"MLTRAIN_SEEDS_FILE": "/nonexistent/seeds.yaml"}),
    "profiles file not YAML": Bad(("run", "fakebench"), "cannot read", prepare=_profiles("workloads: [unclosed\n")),
    "profiles file a list": Bad(("run", "fakebench"), "(top level)", prepare=_profiles("- 1\n- 2\n")),
    "profile drop count a word": Bad(("run", "fakebench"), "drop_per_end", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {drop_per_end: many}\n")),
    "profile negative timeout": Bad(("run", "fakebench"), "timeout_minutes", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {timeout_minutes: -1}\n")),
    "profile bad seed spec": Bad(("run", "fakebench"), "seeds", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {seeds: '1-99999'}\n")),
    "profile env name not a variable": Bad(("run", "fakebench"), "not an environment variable name", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {env: {'A B': 1}}\n")),
    "profile target nan": Bad(("run", "fakebench"), "field workloads.fakebench.qualify.target", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {target: .nan}\n")),
    "profile target negative": Bad(("run", "fakebench"), "field workloads.fakebench.qualify.target",
                                   prepare=_profiles("workloads:\n  fakebench:\n    qualify: {target: -5}\n")),
    "profile timeout infinite": Bad(("run", "fakebench"), "timeout_minutes", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {timeout_minutes: .inf}\n")),
    "profile env value null": Bad(("run", "fakebench"), "FAKE_SLEEP_S has no value", prepare=_profiles(
        "workloads:\n  fakebench:\n    qualify: {env: {FAKE_SLEEP_S: null}}\n")),
    "profiles alias bomb": Bad(("run", "fakebench"), "aliases expand to", prepare=_profiles(_alias_bomb())),
    "profiles alias to itself": Bad(("run", "fakebench"), "refers to its own anchor", prepare=_profiles(
        "workloads: &w {fakebench: *w}\n")),
    "profiles not UTF-8": Bad(("run", "fakebench"), "not UTF-8 text (byte 0xe9 on line 3)", prepare=_raw(
        "seeds.yaml", b"workloads:\n  fakebench:\n    qualify: {env: {NAME: caf\xe9}}\n", "MLTRAIN_SEEDS_FILE")),
    "profiles nested too deeply": Bad(("run", "fakebench"), "nested too deeply", prepare=_profiles(
        "[" * 20000 + "]" * 20000)),
    "profile missing for workload": Bad(("run", "fakebench"), "has no profile", prepare=_profiles(
        "workloads:\n  other:\n    qualify: {}\n")),
    "workload yaml unreadable": Bad(("run", "oddbench"), "workload.yaml", prepare=_workload("name: [oops\n")),
    "workload yaml without run": Bad(("run", "oddbench"), "field run", prepare=_workload(
        WORKLOAD_YAML.format(run="[]", data="[python3, d.py]"))),
    "workload yaml target nan": Bad(("run", "oddbench"), "field quality.target", prepare=_workload(
        WORKLOAD_YAML.format(run="[bash, run.sh]", data="[python3, d.py]").replace("0.9", ".nan"))),
    "workload yaml target negative": Bad(("run", "oddbench"), "field quality.target", prepare=_workload(
        WORKLOAD_YAML.format(run="[bash, run.sh]", data="[python3, d.py]").replace("0.9", "-5"))),
    "workload yaml alias bomb": Bad(("run", "oddbench"), "aliases expand to", prepare=_workload(
        WORKLOAD_YAML.format(run="[bash, run.sh]", data="[python3, d.py]") + _alias_bomb().replace("workloads", "x-"))),
    "workload program missing": Bad(("run", "oddbench"), "no-such-program", prepare=_workload(
        WORKLOAD_YAML.format(run="[no-such-program, run.sh]", data="[python3, d.py]"))),
    "results path is a file": Bad(("run", "fakebench", "--results", "{T}/afile"), "is not a folder",
                                  prepare=_a_file("afile"), results_option=False),
    "results path under a file": Bad(("run", "fakebench", "--results", "{T}/afile/results"), "afile is not a folder",
                                     prepare=_a_file("afile"), results_option=False),
    # list, show, score
    "list results path is a file": Bad(("list", "--results", "{T}/afile"), "is not a folder",
                                       prepare=_a_file("afile"), results_option=False),
    "list names a damaged run": Bad(("list",), "run run-bad cannot be read", may_write=("index.db",),
                                    prepare=_damage("manifest.json", [1, 2, 3])),
    "show unknown run": Bad(("show", "nosuch"), "no run 'nosuch'"),
    "show a path": Bad(("show", "../x"), "bad run id"),
    "show an empty id": Bad(("show", ""), "bad run id"),
    "show a hidden name": Bad(("show", ".hidden"), "bad run id"),
    "show manifest a list": Bad(("show", "run-bad"), "field (top level)", prepare=_damage("manifest.json", [1, 2, 3])),
    "show manifest empty": Bad(("show", "run-bad"), "field run_id", prepare=_damage("manifest.json", {})),
    "show manifest not JSON": Bad(("show", "run-bad"), "unreadable", prepare=_damage("manifest.json", "{nope")),
    "show negative drop count": Bad(("show", "run-bad"), "field rule", prepare=_damage(
        "manifest.json", {"rule": {"drop_per_end": -1, "max_non_converged": 0}})),
    "show manifest of another run": Bad(("show", "run-bad"), "field run_id", prepare=_damage(
        "manifest.json", {"run_id": GOOD})),
    "show unknown seed status": Bad(("show", "run-bad"), "field status", prepare=_damage(
        "seeds/2/state.json", {"seed": 2, "state": "finished", "status": "exploded"})),
    "show seed state of another seed": Bad(("show", "run-bad"), "field seed", prepare=_damage(
        "seeds/2/state.json", {"seed": 3, "state": "finished"})),
    "show run record without status": Bad(("show", "run-bad"), "field status", prepare=_damage(
        "seeds/3/run.json", {"reason": "x"})),
    "show converged run with a negative time": Bad(("show", "run-bad"), "time_to_train_ms", prepare=_damage(
        "seeds/3/run.json", {"status": "converged", "reason": "x", "time_to_train_ms": -1e300})),
    "score converged run without a time": Bad(("score", "run-bad"), "needs its time_to_train_ms", prepare=_damage(
        "seeds/3/run.json", {"status": "converged", "reason": "x"})),
    "show run folder linked from outside": Bad(("show", "run-linked"), "outside", prepare=_outside_run),
    "show seed folder linked from outside": Bad(("show", "run-seedlink"), "outside", prepare=_outside_seed),
    "show decisions without their rule": Bad(("show", "run-bad"), "decisions.json: field rule",
                                             prepare=_damage("decisions.json", {"steps": []})),
    "show decisions of other seeds": Bad(("show", "run-bad"), "decisions.json: field rule.seed_order",
                                         prepare=_damage_decisions(seed_order=[7, 8, 9, 10])),
    "score unknown run": Bad(("score", "nosuch"), "no run 'nosuch'"),
    "score damaged summary": Bad(("score", "run-bad"), "summary.json", prepare=_damage("summary.json", [1])),
    "score seed state a number": Bad(("score", "run-bad"), "field (top level)", prepare=_damage(
        "seeds/2/state.json", 7)),
    # compare
    "compare nothing named": Bad(("compare",), "name at least one run"),
    "compare unknown run": Bad(("compare", "nosuch"), "no run 'nosuch'"),
    "compare unknown label": Bad(("compare", "--label", "nosuch"), "carries the label 'nosuch'"),
    "compare price nan": Bad(("compare", GOOD, "--cost-per-hour", "nan"), "--cost-per-hour 'nan'"),
    "compare price inf": Bad(("compare", GOOD, "--cost-per-hour", "inf"), "--cost-per-hour 'inf'"),
    "compare price negative": Bad(("compare", GOOD, "--cost-per-hour", "-1"), "must not be negative"),
    "compare price a word": Bad(("compare", GOOD, "--cost-per-hour", "cheap"), "with a number"),
    "compare price of an unknown setup": Bad(("compare", GOOD, "--cost-per-hour", "nosuch=2"), "no setup 'nosuch'"),
    "compare unknown baseline": Bad(("compare", GOOD, "--baseline", "nosuch"), "nosuch"),
    "compare json and csv": Bad(("compare", GOOD, "--json", "--csv"), "choose one of --json and --csv"),
    "compare telemetry a list": Bad(("compare", "run-bad"), "telemetry.json: field (top level)",
                                    prepare=_damage("seeds/2/telemetry.json", [])),
    "compare telemetry with a text timestamp": Bad(("compare", "run-bad"), "field host.t_ms.3",
                                                   prepare=_damage_telemetry(lambda t: t["host"]["t_ms"].__setitem__(
                                                       3, "yesterday"))),
    "compare telemetry gpu without a column": Bad(("compare", "run-bad"), "gpus.0 has no power_w column",
                                                  prepare=_damage_telemetry(lambda t: t["gpus"][0].pop("power_w"))),
    "compare telemetry columns of two lengths": Bad(("compare", "run-bad"), "cpu_pct has 2 values",
                                                    prepare=_damage_telemetry(lambda t: t["host"].__setitem__(
                                                        "cpu_pct", [1.0, 2.0]))),
    # report
    "report telemetry gpu without a column": Bad(("report", "run-bad", "--out", "{T}/r.html"),
                                                 "gpus.0 has no util_pct column",
                                                 prepare=_damage_telemetry(lambda t: t["gpus"][0].pop("util_pct"))),
    "report out is a folder": Bad(("report", GOOD, "--out", "{T}/adir"), "is a folder", prepare=_folder("adir")),
    "report out under a file": Bad(("report", GOOD, "--out", "{T}/afile/r.html"), "afile",
                                   prepare=_a_file("afile")),
    "report out cannot be written": Bad(("report", GOOD, "--out", "/proc/mltrain-report.html"), "/proc"),
    "report out empty": Bad(("report", GOOD, "--out", ""), "--out"),
    "report out over a run's manifest": Bad(("report", GOOD, "--out", "{R}/run-good/manifest.json"),
                                             "inside the results folder"),
    "report out over the index": Bad(("report", GOOD, "--out", "{R}/index.db"), "inside the results folder"),
    "report out through a link into the store": Bad(("report", GOOD, "--out", "{T}/link/summary.json"),
                                                    "inside the results folder", prepare=_link("link", "{R}/run-good")),
    "report unknown run": Bad(("report", "nosuch", "--out", "{T}/r.html"), "no run 'nosuch'"),
    "report nothing named": Bad(("report", "--out", "{T}/r.html"), "name at least one run"),
    "report unknown baseline": Bad(("report", GOOD, "--out", "{T}/r.html", "--baseline", "nosuch"), "nosuch"),
    # export
    "export unknown run": Bad(("export", "nosuch", "--mlcommons", "{T}/mlc"), "no run 'nosuch'"),
    "export into a file": Bad(("export", GOOD, "--mlcommons", "{T}/afile"), "afile", prepare=_a_file("afile")),
    "export into the results folder": Bad(("export", GOOD, "--mlcommons", "{R}/mlc"), "inside the results folder"),
    "export under /proc": Bad(("export", GOOD, "--mlcommons", "/proc/mltrain-export"), "/proc"),
    "export over a hand-written system description": Bad(
        ("export", GOOD, "--mlcommons", "{T}/mlc", "--system-name", "mine"), "systems/mine.json already exists",
        prepare=lambda box: _write(box.tmp / "mlc" / "systems" / "mine.json", '{"submitter": "by hand"}\n')),
    "export unknown ruleset": Bad(("export", GOOD, "--mlcommons", "{T}/mlc", "--ruleset", "9.9.9"), "9.9.9"),
    "export benchmark escaping the folder": Bad(("export", GOOD, "--mlcommons", "{T}/mlc"), "benchmark",
                                                prepare=_foreign_benchmark),
    # import
    "import missing folder": Bad(("import", "{T}/nosuch", "--benchmark", "unet3d"), "nosuch: no such folder"),
    "import a file": Bad(("import", "{T}/afile", "--benchmark", "unet3d"), "afile: a file, not a folder",
                         prepare=_a_file("afile")),
    "import folder without logs": Bad(("import", "{T}/empty", "--benchmark", "unet3d"), "no result_<n>.txt files",
                                      prepare=_folder("empty")),
    "import unknown benchmark": Bad(("import", "{T}/logs", "--benchmark", "nosuch"), "no workload implements",
                                    prepare=_logs(lambda n, log: log)),
    "import unknown epoch unit": Bad(("import", "{T}/logs", "--benchmark", "unet3d", "--epochs-in", "hours"),
                                     "'hours' is not one of", prepare=_logs(lambda n, log: log)),
    "import log without run_start": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "run_start not recorded",
                                        prepare=_logs(lambda n, log: log.replace('"run_start"', '"not_start"'))),
    "import time_ms NaN": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "time_ms",
                              prepare=_logs(_edit_event("run_stop", _set("time_ms", math.nan)))),
    "import time_ms infinite": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "time_ms",
                                   prepare=_logs(_edit_event("run_stop", _set("time_ms", math.inf)))),
    "import time_ms beyond SQLite": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "time_ms",
                                        prepare=_logs(_edit_event("run_stop", _set("time_ms", 10**30)))),
    "import run_stop 2^53 ms": Bad(("import", "{T}/logs", "--benchmark", "unet3d"),
                                   "days after run_start (at most 366 days): not a time a run took",
                                   prepare=_logs(_edit_event("run_stop", _set("time_ms", 2**53)))),
    "import epoch_num a word": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "epoch_num",
                                   prepare=_logs(_edit_event("eval_accuracy", _set("metadata.epoch_num", "x")))),
    "import seed NaN": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "seed",
                           prepare=_logs(_edit_event("seed", _set("value", math.nan)))),
    "import result number overflows": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "result_",
                                          prepare=_logs(lambda n, log: log, ("result_0.txt", f"result_{10**30}.txt"))),
    "import result_1 beside result_01": Bad(("import", "{T}/logs", "--benchmark", "unet3d"), "result_01",
                                            prepare=_logs(lambda n, log: log, ("result_1.txt", "result_01.txt"))),
    # infer
    "infer unknown model": Bad(("infer", "nosuch"), "nosuch"),
    "infer unknown scenario": Bad(("infer", "resnet50", "--scenario", "Burst"), "'Burst' is not one of"),
    "infer search outside Server": Bad(("infer", "resnet50", "--search"), "--search finds the Server scenario's"),
    "infer target qps a word": Bad(("infer", "resnet50", "--target-qps", "lots"), "--target-qps 'lots'"),
    "infer tensorrt with torch": Bad(("infer", "resnet50", "--backend", "torch", "--device", "tensorrt"),
                                     "use --backend onnxruntime"),
    "infer mlperf shortened": Bad(("infer", "resnet50", "--profile", "mlperf", "--time", "1", "--model", "{T}/m.onnx",
                                   "--data", "{T}"), "drop --time and --count", prepare=_a_file("m.onnx")),
    "infer target qps 1e-300": Bad(("infer", "resnet50", "--target-qps", "1e-300"),
                                   "--target-qps 1e-300: give a number from 0.001 to 10,000,000 queries/s"),
    "infer target qps 1e308": Bad(("infer", "resnet50", "--target-qps", "1e308"), "--target-qps 1e+308: give a"),
    "infer target qps NaN": Bad(("infer", "resnet50", "--target-qps", "nan"), "--target-qps nan: give a"),
    "infer target latency 1e-300": Bad(("infer", "resnet50", "--scenario", "SingleStream", "--target-latency-ms",
                                        "1e-300"), "--target-latency-ms 1e-300: give a number from 0.001 to"),
    "infer time infinite": Bad(("infer", "resnet50", "--time", "inf"), "--time inf: give a number from 0.001 to"),
    "infer 100000 threads": Bad(("infer", "resnet50", "--threads", "100000"), "--threads 100,000: give a number"),
    "infer max batch 2^40": Bad(("infer", "resnet50", "--max-batch", str(2**40)), "to 65,536 samples"),
    "infer count beyond the dataset": Bad(("infer", "resnet50", "--count", "50001"),
                                          "--count 50,001: give a number from 1 to 50,000 samples"),
    "infer model with a fixed batch of 2^40": Bad(
        ("infer", "resnet50", "--model", "{T}/big.onnx", "--data", "{T}"), "a fixed batch of 1,099,511,627,776",
        prepare=_onnx_with_batch("big.onnx", 2**40)),
    "infer label with a newline": Bad(("infer", "resnet50", "--label", "a\nb"), "--label 'a\\nb': give a name"),
    "import label with a newline": Bad(("import", "{T}/logs", "--benchmark", "unet3d", "--label", "a\nb"),
                                       "--label 'a\\nb': give a name", prepare=_logs(lambda n, log: log)),
    "infer model file missing": Bad(("infer", "resnet50", "--model", "{T}/none.onnx", "--data", "{T}"), "none.onnx"),
    "infer model not ONNX": Bad(("infer", "resnet50", "--model", "{T}/m.onnx", "--data", "{T}"),
                                "m.onnx: not an ONNX model", prepare=_a_file("m.onnx")),
    "infer model empty": Bad(("infer", "resnet50", "--model", "{T}/m.onnx", "--data", "{T}"),
                             "m.onnx: not an ONNX model (no graph and no opset in it)",
                             prepare=lambda box: _write(box.tmp / "m.onnx", "")),
    # data, build, clean, sysinfo
    "data unknown workload": Bad(("data", "nosuch", "check", "/tmp"), "unknown workload or inference model 'nosuch'",
                                 results_option=False),
    "data program missing": Bad(("data", "oddbench", "check", "{T}"), "no-such-program", results_option=False,
                                prepare=_workload(WORKLOAD_YAML.format(run="[bash, run.sh]",
                                                                       data="[no-such-program, d.py]"))),
    "build unknown workload": Bad(("build", "nosuch"), "unknown workload 'nosuch'", results_option=False),
    "build base image with a space": Bad(("build", "fakebench", "--base-image", "a b"), "--base-image",
                                         results_option=False),
    "clean a path as run id": Bad(("clean", "--run", "../x"), "bad run id", results_option=False),
    "sysinfo data folder missing": Bad(("sysinfo", "--data", "/nonexistent/data"), "no such folder",
                                       results_option=False),
    "sysinfo data is a device": Bad(("sysinfo", "--data", "/dev/zero"), "--data /dev/zero: a character device, not a "
                                    "folder", results_option=False),
    "sysinfo system description under /proc": Bad(("sysinfo", "--system-desc", "/proc/mltrain"), "/proc",
                                                  results_option=False),
    "sysinfo system description into the store": Bad(("sysinfo", "--system-desc", "{R}/systems"),
                                                      "inside the results folder", results_option=False,
                                                      env={"MLTRAIN_RESULTS": "{R}"}),
    "sysinfo gpu trace over the index": Bad(("sysinfo", "--record-gpu-trace", "{R}/index.db"),
                                            "inside the results folder", results_option=False,
                                            env={"MLTRAIN_RESULTS": "{R}"}),
    "qualify junit over the index": Bad(("qualify", "--junit", "{R}/index.db"), "inside the results folder"),
    "qualify prometheus under /proc": Bad(("qualify", "--prometheus", "/proc/mltrain/node.prom"), "/proc"),
    "qualify data missing": Bad(("qualify", "--data", "{T}/nosuch"), "nosuch: no such folder"),
    "qualify junit is a folder": Bad(("qualify", "--junit", "{T}/adir"), "is a folder", prepare=_folder("adir")),
    "qualify history html into a run": Bad(("qualify", "history", "--html", "{R}/run-good/run.html"),
                                           "inside the results folder"),
    "qualify history html under /proc": Bad(("qualify", "history", "--html", "/proc/mltrain/h.html"), "/proc"),
    "sysinfo zero samples": Bad(("sysinfo", "--record-gpu-trace", "{T}/t.json", "--samples", "0"), "--samples",
                                results_option=False),
    # the command line itself
    "unknown command": Bad(("frobnicate",), "No such command", results_option=False),
    "unknown option": Bad(("list", "--colour", "red"), "No such option", results_option=False),
    "missing argument": Bad(("show",), "Missing argument", results_option=False),
}


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if not p.is_symlink() or p.exists()}


def _params() -> list:
    return [pytest.param(case, id=name)
            for name, case in sorted(CASES.items())]


def test_the_table_covers_every_verb_with_at_least_60_cases():
    from orchestrator.cli import build_app

    verbs = {c.name for c in build_app().registered_commands}
    covered = {case.argv[0] for case in CASES.values()}
    assert len(CASES) >= 60 and verbs <= covered, sorted(verbs - covered)


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder holding one good run, made once and copied for each case."""
    results = tmp_path_factory.mktemp("template") / "results"
    make_run(results, label="good", seeds=[1, 2, 3], run_id=GOOD)
    (results / "index.db").unlink()  # a cache: no bad input may make it again
    return results


@pytest.mark.parametrize("case", _params())
def test_bad_input_is_exit_2_one_line_and_writes_nothing(cli, mltrain_env, good_store: Path, tmp_path: Path,
                                                         monkeypatch, case: Bad):
    box = Sandbox(tmp_path, tmp_path / "results", dict(mltrain_env))
    shutil.copytree(good_store, box.results, symlinks=True)
    if case.prepare is not None:
        case.prepare(box)
    for key, value in {**box.env, **case.env}.items():
        monkeypatch.setenv(key, box.sub(value))
    argv = [box.sub(a) for a in case.argv] + (["--results", str(box.results)] if case.results_option else [])
    before = _snapshot(tmp_path)

    r = cli(*argv)

    assert r.code == 2, r.err
    first, *how = r.err.splitlines()  # one error line; an indented how-to may follow (a missing data folder)
    assert first.startswith("error: ") and all(line.startswith("  ") or not line for line in how), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    assert box.sub(case.says) in r.err, r.err
    after = _snapshot(tmp_path)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    allowed = {f"results/{p}" for p in (*case.may_write, *INDEX_FILES)}
    if changed & {f"results/{name}" for name in INDEX_FILES}:
        allowed.add("results")  # the folder's own time: the index appeared in it
    assert changed <= allowed, sorted(changed - allowed)
    listed = cli("list", "--results", str(box.results), "--json")
    assert GOOD in [row["run_id"] for row in json.loads(listed.out)], listed.err
