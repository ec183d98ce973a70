"""The on-disk layout of mltrain: every path comes from here.

    <results>/index.db                      SQLite index (rebuildable from the folders)
    <results>/<run_id>/manifest.json        workload, profile, seeds, runner, host, times, versions
    <results>/<run_id>/summary.json         the scored result
    <results>/<run_id>/seeds/<seed>/state.json    lifecycle of one seed (pending ... finished)
    <results>/<run_id>/seeds/<seed>/output.log    everything the run printed, as it arrived
    <results>/<run_id>/seeds/<seed>/run.json      the run record parsed from its MLLOG lines
    <results>/<run_id>/seeds/<seed>/results/      the workload's RESULTS_DIR (/results)
    <results>/<run_id>/seeds/<seed>/telemetry.json  sampled hardware telemetry
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

INDEX_NAME = "index.db"


@dataclass(frozen=True)
class RunPaths:
    """Paths of one benchmark run."""

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    def seed(self, seed: int) -> SeedPaths:
        return SeedPaths(self.root / "seeds" / str(seed))

    def seed_dirs(self) -> list[SeedPaths]:
        folder = self.root / "seeds"
        if not folder.is_dir():
            return []
        return [SeedPaths(p) for p in sorted(folder.iterdir(), key=lambda p: (len(p.name), p.name)) if p.is_dir()]


@dataclass(frozen=True)
class SeedPaths:
    """Paths of one seed of a benchmark run."""

    root: Path

    @property
    def seed(self) -> int:
        return int(self.root.name)

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def output(self) -> Path:
        return self.root / "output.log"

    @property
    def record(self) -> Path:
        return self.root / "run.json"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def telemetry(self) -> Path:
        return self.root / "telemetry.json"
