"""The quorum's repeats (`quorum`) on a node: the named checks run again through the same runner,
each attempt in its own folder (``<qualification>/repeat-<n>/``), as the first run ran them: the
probe narrowed to the checks asked for (`micro`), the workload's throughput mode (`throughput`),
the inference harness (`inference`).
Health is not sampled again (the health check covered the first load); a repeat's own health or
sanity fault still counts (`quorum`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.workloads import Workload
from orchestrator.qualify import micro
from orchestrator.qualify.config import DeviceKind, ProbeSettings, Suite
from orchestrator.qualify.devices import Gpu
from orchestrator.qualify.inference import inference_check
from orchestrator.qualify.throughput import throughput_check
from orchestrator.results.qualification import CheckResult
from orchestrator.runners.base import Runner


@dataclass(frozen=True, kw_only=True)
class NodeRepeats:
    """What a repeat of a node's checks needs: where and how the first run ran them."""

    runner: Runner
    workload: Workload
    suite: Suite
    probe: ProbeSettings
    run_id: str
    folder: Path
    scratch: Path
    data: Path | None
    kind: DeviceKind
    gpus: Mapping[int, Gpu]
    status: Callable[[str], None] = lambda _: None
    inference_roots: tuple[Path, ...] = ()

    def __call__(self, names: tuple[str, ...], attempt: int) -> list[CheckResult]:
        folder = self.folder / f"repeat-{attempt}"
        checks: list[CheckResult] = []
        probed = tuple(n for n in self.probe.checks if n in names)
        if probed:
            settings = self.probe.model_copy(update={"checks": probed})
            self.status(f"  repeat {attempt}: probe ({', '.join(probed)})")
            run = micro.run_probe(self.runner, suite=self.suite, probe=settings, workload=self.workload,
                                  run_id=self.run_id, data_dir=self.data or self.scratch, folder=folder / "probe")
            checks += micro.probe_checks(run, self.suite, settings, self.gpus)
        if "throughput" in names:
            self.status(f"  repeat {attempt}: throughput")
            checks.append(throughput_check(
                self.runner, workload=self.workload, spec=self.suite.device(self.kind).throughput, run_id=self.run_id,
                data_dir=self.data, scratch=self.scratch, folder=folder / "throughput"))
        if "inference" in names:
            self.status(f"  repeat {attempt}: inference")
            checks.append(inference_check(self.runner, spec=self.suite.device(self.kind).inference,
                                          roots=self.inference_roots, run_id=self.run_id,
                                          folder=folder / "inference"))
        return checks
