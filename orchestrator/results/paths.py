"""The on-disk layout of a results folder: every path of every kind of run comes from here.

    <results>/index.db                      SQLite index of training and inference runs (rebuildable from the folders)

A training run (`RunPaths`, `SeedPaths`):

    <results>/<run_id>/manifest.json        workload, profile, seeds, runner, host, times, versions
    <results>/<run_id>/run.lock             held (fcntl) by the process running the run: host, PID, start
    <results>/<run_id>/summary.json         the scored result
    <results>/<run_id>/decisions.json       a sequential rule's decision after each seed (--until-decided, --seeds auto)
    <results>/<run_id>/rows.json            its index rows as its last write left them (a first listing reads them)
    <results>/<run_id>/seeds/<seed>/state.json    lifecycle of one seed (pending ... finished)
    <results>/<run_id>/seeds/<seed>/output.log    everything the run printed, as it arrived
    <results>/<run_id>/seeds/<seed>/run.json      the run record parsed from its MLLOG lines
    <results>/<run_id>/seeds/<seed>/results/      the workload's RESULTS_DIR (/results)
    <results>/<run_id>/seeds/<seed>/telemetry.json  sampled hardware telemetry
    <results>/<run_id>/seeds/<seed>/slurm-job.sh, slurm-job.out  the batch script and its output (Slurm)
    <results>/<run_id>/seeds/<seed>/attempt-<n>/  what an earlier, unfinished or retried attempt left

An inference run (`InferencePaths`): the MLPerf Inference results layout of one model and scenario.

    <results>/<run_id>/inference.json       the record (a training run has a manifest.json instead)
    <results>/<run_id>/run.lock             as a training run's
    <results>/<run_id>/performance/ accuracy/ trace/ search/ jobs/   LoadGen's files, each job's folder

Qualifications (`QualificationPaths`):

    <results>/qualify/nodes/<node>/<qualification_id>.json    a `QualificationRecord`
    <results>/qualify/nodes/<node>/<qualification_id>/         its jobs' folders (probe/, throughput/)
    <results>/qualify/nodes/<node>/<qualification_id>/qualify.lock  held while it runs, removed when it ends
    <results>/qualify/fleet/<fleet_id>.json                    a `FleetRecord`
    <results>/qualify/fleet/<fleet_id>/<node>/order.json       a `NodeOrder`, beside that node job's files

Every path built from a name that came from outside (a run id typed or stored, a folder that may
be a link) is checked to stay inside its folder (`check_run_id`, `check_node_name`, `inside`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import RecordError, UsageError

INDEX_NAME = "index.db"
MANIFEST_NAME = "manifest.json"
SUMMARY_NAME = "summary.json"
DECISIONS_NAME = "decisions.json"
STATE_NAME = "state.json"
RECORD_NAME = "run.json"
TELEMETRY_NAME = "telemetry.json"
INFERENCE_FILE = "inference.json"
LOCK_NAME = "run.lock"
ROWS_NAME = "rows.json"
"""A training run's index rows, kept beside its records (`results.index_rows`)."""
QUALIFY_LOCK = "qualify.lock"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""What mltrain names runs (`<workload>-<profile>-<stamp>-<hex>`), and all a run id may be."""
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
"""What a node (and a qualification or fleet id) may be called."""


def check_run_id(run_id: str) -> str:
    """A run id as a single safe folder name; UsageError otherwise."""
    if not RUN_ID.match(run_id) or ".." in run_id:
        raise UsageError(
            f"bad run id {run_id!r}: run ids are letters, digits, '.', '_' and '-' (see `mltrain list`)"
        )
    return run_id


def check_node_name(node: str, what: str = "node name") -> str:
    """A node name (or a qualification or fleet id) as a single safe folder name; UsageError otherwise."""
    if not NODE_NAME.match(node):
        raise UsageError(f"{what} {node!r}: use letters, digits, '.', '_' and '-'")
    return node


def inside(path: Path, root: Path) -> Path:
    """``path`` resolved (links followed); RecordError when that leaves ``root``, or when its links
    lead in a loop (`Path.resolve` raises RuntimeError for one)."""
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError) as exc:
        why = "its links lead in a loop" if isinstance(exc, RuntimeError) else exc.strerror or str(exc)
        raise RecordError(f"{path}: a link that cannot be followed ({why}); remove it") from None
    if not resolved.is_relative_to(root.resolve()):
        raise RecordError(
            f"{path}: resolves outside {root} (to {resolved}); move the folder itself there rather than linking it"
        )
    return resolved


@dataclass(frozen=True)
class RunPaths:
    """Paths of one benchmark run."""

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def summary(self) -> Path:
        return self.root / SUMMARY_NAME

    @property
    def decisions(self) -> Path:
        return self.root / DECISIONS_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    def seed(self, seed: int) -> SeedPaths:
        return SeedPaths(self.root / "seeds" / str(seed))

    def seed_dirs(self) -> list[SeedPaths]:
        folder = self.root / "seeds"
        if not folder.is_dir():
            return []
        return [SeedPaths(p) for p in sorted(folder.iterdir(), key=lambda p: (len(p.name), p.name)) if p.is_dir()]


@dataclass(frozen=True)
class JobPaths:
    """The folder of one job on a runner (a seed, a qualification step, an inference job, a fleet's
    node job): what it printed, its RESULTS_DIR, and a Slurm job's batch script and output file."""

    root: Path

    @property
    def output(self) -> Path:
        """Everything the job printed, as it arrived."""
        return self.root / "output.log"

    @property
    def results(self) -> Path:
        """The job's RESULTS_DIR (/results in a container)."""
        return self.root / "results"

    @property
    def slurm_script(self) -> Path:
        return self.root / "slurm-job.sh"

    @property
    def slurm_output(self) -> Path:
        return self.root / "slurm-job.out"

    @property
    def container_spec(self) -> Path:
        """The container each node of a Slurm job starts (``--runner slurm-docker``)."""
        return self.root / "container.json"


@dataclass(frozen=True)
class SeedPaths(JobPaths):
    """Paths of one seed of a benchmark run: its job's folder, with its state, record and telemetry."""

    @property
    def seed(self) -> int:
        return int(self.root.name)

    @property
    def state(self) -> Path:
        return self.root / STATE_NAME

    @property
    def record(self) -> Path:
        return self.root / RECORD_NAME

    @property
    def telemetry(self) -> Path:
        return self.root / TELEMETRY_NAME

    @property
    def node_telemetry(self) -> Path:
        """The folder of each node's own series, ``<node>.json``, of a seed a batch system ran."""
        return self.root / "nodes"

    def attempt(self, n: int) -> Path:
        return self.root / f"attempt-{n}"

    @property
    def attempt_files(self) -> tuple[Path, ...]:
        """What one attempt of the seed leaves (archived under attempt-<n>/ before the next)."""
        return (self.output, self.results, self.record, self.telemetry, self.node_telemetry, self.slurm_script,
                self.slurm_output)


@dataclass(frozen=True)
class InferencePaths:
    """The folder of an inference run: the MLPerf Inference results layout of one model and scenario.

        inference.json               the record
        user.conf                    what LoadGen was given beside mlperf.conf
        performance/run_1/           mlperf_log_summary.txt, mlperf_log_detail.txt
        accuracy/                    the same, mlperf_log_accuracy.json, accuracy.txt
        trace/                       the backend's per-operator profile (--trace)
        search/trial_<n>/            each Server QPS trial (--search): its user.conf and logs
        compliance/TEST01/           a compliance test (--compliance): performance/run_1/, accuracy/,
                                     verify_accuracy.txt, verify_performance.txt
        jobs/<name>/output.log       what each harness job printed; its harness.json
    """

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def record(self) -> Path:
        return self.root / INFERENCE_FILE

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def performance(self) -> Path:
        return self.root / "performance" / "run_1"

    @property
    def accuracy(self) -> Path:
        return self.root / "accuracy"

    def job(self, name: str) -> Path:
        return self.root / "jobs" / name

    def compliance(self, test: str) -> Path:
        """A compliance test's folder: its LoadGen logs and verify_*.txt (the submission layout's TESTxx)."""
        return self.root / "compliance" / test

    def trial(self, number: int) -> Path:
        return self.root / "search" / f"trial_{number}"


@dataclass(frozen=True)
class QualificationPaths:
    """``<results>/qualify/``: node qualifications and fleets (names checked by `check_node_name`)."""

    root: Path

    @property
    def nodes(self) -> Path:
        return self.root / "nodes"

    def node(self, node: str) -> Path:
        """A node's folder: its records, and a folder per qualification."""
        return self.nodes / check_node_name(node)

    def record(self, node: str, qualification_id: str) -> Path:
        return self.node(node) / f"{check_node_name(qualification_id, 'qualification id')}.json"

    def folder(self, node: str, qualification_id: str) -> Path:
        """One qualification's folder: its jobs' folders, its lock while it runs."""
        return self.node(node) / check_node_name(qualification_id, "qualification id")

    @property
    def fleets(self) -> Path:
        return self.root / "fleet"

    def fleet(self, fleet_id: str) -> Path:
        """One fleet's folder: a folder per node job (its order, its record, its files), its lock."""
        return self.fleets / check_node_name(fleet_id, "fleet id")

    def fleet_record(self, fleet_id: str) -> Path:
        return self.fleets / f"{check_node_name(fleet_id, 'fleet id')}.json"

    def order(self, fleet_id: str, node: str) -> Path:
        return self.fleet(fleet_id) / check_node_name(node) / "order.json"

    def node_record(self, fleet_id: str, node: str) -> Path:
        """Where a fleet's node job leaves its record for the fleet to gather."""
        return self.fleet(fleet_id) / check_node_name(node) / "record.json"

    @staticmethod
    def lock(folder: Path) -> Path:
        return folder / QUALIFY_LOCK
