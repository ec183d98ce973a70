"""throughput: N timed steps of the workload's own throughput mode (`qualify.throughput`), through the
runner and image `mltrain run` uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from orchestrator.config.numbers import TimeoutMinutes
from orchestrator.qualify.checks.base import result
from orchestrator.qualify.checks.declaration import CheckSettings, Declaration, Remedies
from orchestrator.qualify.throughput import throughput_check
from orchestrator.results.qualification import CheckResult, Remedy, Status

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class ThroughputSpec(CheckSettings):
    steps: int = Field(default=20, ge=1)
    warmup_steps: int = Field(default=5, ge=0)
    env: dict[str, str] = Field(default_factory=dict)
    """The workload's model knobs (INPUT_SHAPE, FILTERS, BATCH_SIZE ...) for this device kind."""
    timeout_minutes: TimeoutMinutes = 10  # type: ignore[assignment]


class ThroughputCheck:
    declaration = Declaration(
        name="throughput", kind="workload", runs="job", settings=ThroughputSpec,
        sanity="the workload's throughput mode exits 0 and prints its final `throughput` MLLOG line",
        units={"throughput_samples_per_s": "samples/s", "step_ms_median": "ms", "loader_samples_per_s": "samples/s",
               "tokens_per_s_per_device": "tokens/s", "mfu": "of peak"},
        sane={"*_samples_per_s": (0, 1e9), "step_ms_median": (0, 1e8), "tokens_per_s_per_device": (0, 1e12),
              "mfu": (0, 1)},
        timeout_s=600, repeat=True, device_bound=True,
        remedies=Remedies(wrong=Remedy.INVESTIGATE, slow=Remedy.INVESTIGATE),
    )

    def run(self, ctx: NodeContext) -> CheckResult:
        if ctx.prepare_error:
            return result(self.declaration, Status.INCONCLUSIVE, [ctx.prepare_error])
        spec = ctx.settings(self.declaration)
        return throughput_check(ctx.runner, workload=ctx.plan.workload, spec=spec,  # type: ignore[arg-type]
                                run_id=ctx.run_id, data_dir=ctx.plan.data, scratch=ctx.scratch,
                                folder=ctx.folder / "throughput")
