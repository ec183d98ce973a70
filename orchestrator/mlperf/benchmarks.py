"""MLPerf Training's rules per benchmark: the one table mltrain keeps of them, read from the installed
mlperf_logging wherever the package knows a fact, typed here only where it does not.

=====================  ====================================================================================
fact                   source (mlperf-logging 4.1.68)
=====================  ====================================================================================
runs                   ``benchmark_meta.get_result_file_counts("training")``: result files a submission needs
rulesets               the training rulesets whose compliance rules (``compliance_checker/training_<r>/``) and
                       RCP tables (``rcp_checker/training_<r>/``) are installed, of those
                       ``benchmark_meta.get_allowed_benchmarks`` lists the benchmark in
default ruleset        the benchmark's last ruleset (unet3d and resnet: 4.0.0, the last round that had them)
RCP table              ``rcp_checker/training_<r>/rcps_<benchmark>.json`` is installed
drop_per_end           typed: `SUMMARIZER_DROPS`. The result summarizer decides it in code, not data
                       (``_compute_strong_score_standalone``: ``4 if benchmark == "unet3d" else 1``);
                       tests/mlperf/test_benchmarks.py reads that line of the installed package
max_non_converged      = drop_per_end (the summarizer gives no score when more runs were dropped)
RCPs in samples        typed: `RCP_IN_SAMPLES`, the RCP tables whose epochs are samples (unet3d from 3.1:
                       ../shared/spec/scoring.md; their values are multiples of 168; llama31_8b in every
                       ruleset that has it: the RCP checker reads its ``samples_count``)
published results      typed: `PUBLISHED_TRAIN_SAMPLES`, the benchmarks of ``published/systems.csv`` with
                       their dataset's training samples per epoch (KiTS19's 168 cases, which the closed
                       unet3d rules check; ImageNet 2012's 1,281,167 images; llama31_8b: 1, the table
                       counts its sequences)
=====================  ====================================================================================

What a workload itself declares (the benchmark it implements, its ruleset, its quality metric,
direction and target) is in its ``workload.yaml`` (`orchestrator.config.workloads`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.workloads import DECLARATION, Workload
from orchestrator.errors import ConfigError, UsageError
from orchestrator.results.records import ScoringRule

USAGE = "training"
SUMMARIZER_DROPS = {"unet3d": 4}
"""Runs the result summarizer drops at each end, where it is not `DEFAULT_DROPS`."""
DEFAULT_DROPS = 1
RCP_IN_SAMPLES = {"unet3d": ("3.1.0", "4.0.0"), "llama31_8b": ("5.1.0", "6.0.0", "6.1.0")}
"""Rulesets whose RCP table for the benchmark counts epochs in samples."""
PUBLISHED_TRAIN_SAMPLES = {"unet3d": 168, "resnet": 1_281_167, "llama31_8b": 1}
"""Benchmarks with published results shipped in ``published/systems.csv``: training samples per epoch.
llama31_8b's is 1: its table counts sequences to target (its RCPs do; its logs' train_samples differ by
submitter), so one sequence is the table's epoch."""
_RULESET = re.compile(r"^\d+\.\d+\.\d+$")


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """MLPerf's rules for one training benchmark."""

    name: str
    """As mlperf_logging names it (``submission_benchmark``): unet3d, resnet, llama2_70b_lora ..."""
    runs: int
    """Runs a result needs."""
    drop_per_end: int
    """Olympic scoring: runs dropped at the fast end; at the slow end, this less the non-converged."""
    rulesets: tuple[str, ...]
    """Training rulesets that have the benchmark and whose checkers are installed, oldest first."""
    rcp_rulesets: tuple[str, ...]
    """Rulesets with an RCP table for the benchmark."""
    train_samples: int | None = None
    """Published results: the dataset's training samples per epoch; None: none are shipped."""

    @property
    def max_non_converged(self) -> int:
        return self.drop_per_end

    @property
    def default_ruleset(self) -> str:
        """The ruleset used where none is declared or given: the benchmark's last."""
        if not self.rulesets:
            raise UsageError(f"{self.name} is in no training ruleset whose checkers mlperf_logging installs")
        return self.rulesets[-1]

    @property
    def published(self) -> bool:
        return self.train_samples is not None

    def rule(self) -> ScoringRule:
        """How MLCommons scores a set of runs of the benchmark."""
        return ScoringRule(drop_per_end=self.drop_per_end, max_non_converged=self.max_non_converged,
                           runs_required=self.runs)

    def rcp_counts_samples(self, ruleset: str) -> bool:
        return ruleset in RCP_IN_SAMPLES.get(self.name, ())


def _package_folder(module: str) -> Path:
    import importlib

    return Path(importlib.import_module(module).__file__ or "").parent


def checkable_rulesets() -> tuple[str, ...]:
    """Training rulesets with both compliance rules and RCP tables installed, oldest first."""
    found = [{entry.name.removeprefix(f"{USAGE}_") for entry in _package_folder(module).iterdir()
              if entry.is_dir() and _RULESET.match(entry.name.removeprefix(f"{USAGE}_"))
              and entry.name.startswith(f"{USAGE}_")}
             for module in ("mlperf_logging.compliance_checker", "mlperf_logging.rcp_checker")]
    return tuple(sorted(found[0] & found[1], key=_version))


def latest_ruleset() -> str:
    """The newest training ruleset mlperf_logging can check (a system description made outside any run)."""
    return checkable_rulesets()[-1]


def names() -> tuple[str, ...]:
    """Every training benchmark mlperf_logging knows."""
    from mlperf_logging.benchmark_meta import get_result_file_counts

    return tuple(sorted(get_result_file_counts(USAGE)))


def is_known(name: str) -> bool:
    """A name MLCommons gives a training benchmark (``unet3d``, ``resnet``): safe as a folder name."""
    return bool(re.fullmatch(r"[a-z0-9_]+", name)) and name in names()


def with_published_results() -> tuple[str, ...]:
    """The benchmarks whose published results ship in ``published/systems.csv``."""
    return tuple(sorted(PUBLISHED_TRAIN_SAMPLES))


def get(name: str) -> Benchmark:
    """The benchmark's rules; one line naming the known benchmarks when mlperf_logging knows none of that name."""
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts

    counts = get_result_file_counts(USAGE)
    if not is_known(name):
        raise UsageError(f"{name[:40]!r} is not an MLPerf training benchmark mlperf_logging knows"
                         f" ({', '.join(sorted(counts))})")
    rulesets = tuple(r for r in checkable_rulesets() if name in get_allowed_benchmarks(USAGE, r))
    rcp = _package_folder("mlperf_logging.rcp_checker")
    return Benchmark(
        name=name, runs=int(counts[name]), drop_per_end=SUMMARIZER_DROPS.get(name, DEFAULT_DROPS), rulesets=rulesets,
        rcp_rulesets=tuple(r for r in rulesets if (rcp / f"{USAGE}_{r}" / f"rcps_{name}.json").is_file()),
        train_samples=PUBLISHED_TRAIN_SAMPLES.get(name),
    )


def check_ruleset(ruleset: str, benchmark: str, option: str = "--ruleset") -> str:
    """The ruleset, or one line saying which ones mlperf_logging can check and which have the benchmark."""
    known = checkable_rulesets()
    fits = get(benchmark).rulesets
    if ruleset not in known:
        raise UsageError(f"{option} {ruleset}: mlperf-logging knows training rulesets {', '.join(known)};"
                         f" {benchmark} is in {', '.join(fits) or 'none'}")
    if ruleset not in fits:
        raise UsageError(f"{option} {ruleset}: {benchmark} is not a benchmark of training {ruleset};"
                         f" use one of {', '.join(fits) or 'none'}")
    return ruleset


def ruleset_for(benchmark: str, declared: str | None, option: str = "ruleset") -> str:
    """The ruleset a run of ``benchmark`` is checked and scored under: the declared one (checked), else
    the benchmark's default."""
    return check_ruleset(declared, benchmark, option) if declared is not None else get(benchmark).default_ruleset


def ruleset_of(workload: Workload) -> str:
    """The ruleset a workload's runs are checked and scored under: its declared one, checked against
    its benchmark, else the benchmark's default. One line naming the declaration when either is wrong."""
    where = f"{workload.folder / DECLARATION}:"
    try:
        return ruleset_for(workload.mlperf_benchmark, workload.ruleset, option=f"{where} ruleset")
    except UsageError as exc:
        if is_known(workload.mlperf_benchmark):
            raise ConfigError(str(exc)) from None
        raise ConfigError(f"{where} mlperf_benchmark {exc}") from None


def _version(ruleset: str) -> tuple[int, ...]:
    return tuple(int(p) for p in ruleset.split("."))
