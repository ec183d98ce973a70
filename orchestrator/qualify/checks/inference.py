"""inference: the inference harness's smoke model under the real LoadGen for a few seconds
(`qualify.inference`): its p90 latency (SingleStream) or samples/s (Offline)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from orchestrator.config.numbers import TimeoutMinutes
from orchestrator.qualify.checks.declaration import CheckSettings, Declaration, Remedies
from orchestrator.qualify.inference import inference_check
from orchestrator.results.qualification import CheckResult, Remedy

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext


class InferenceSpec(CheckSettings):
    """The inference check (`orchestrator.qualify.inference`): the harness's smoke model under LoadGen."""

    model: str = Field(min_length=1)
    """A model the inference harness declares (its inference.yaml) with a smoke model."""
    scenario: Literal["SingleStream", "Offline"] = "SingleStream"
    backend: Literal["onnxruntime", "torch"] = "onnxruntime"
    device: Literal["cpu", "cuda", "tensorrt"] = "cpu"
    seconds: float = Field(default=5, gt=0)
    """LoadGen's minimum duration: long enough for a few hundred queries, far below MLPerf's 10 minutes."""
    timeout_minutes: TimeoutMinutes = 10  # type: ignore[assignment]


class InferenceCheck:
    declaration = Declaration(
        name="inference", kind="workload", runs="job", settings=InferenceSpec,
        sanity="the harness runs the smoke model under LoadGen to its end with no LoadGen error",
        units={"inference_p90_ms": "ms", "inference_samples_per_s": "samples/s"},
        sane={"inference_p90_ms": (0, 1e8), "inference_samples_per_s": (0, 1e9)},
        timeout_s=600, repeat=True, remedies=Remedies(wrong=Remedy.INVESTIGATE, slow=Remedy.INVESTIGATE),
    )

    def run(self, ctx: NodeContext) -> CheckResult:
        spec = ctx.settings(self.declaration)
        return inference_check(ctx.runner, spec=spec, roots=ctx.plan.inference_roots,  # type: ignore[arg-type]
                               run_id=ctx.run_id, folder=ctx.folder / "inference", status=ctx.watch.status)
