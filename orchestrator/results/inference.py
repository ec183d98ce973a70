"""The typed records of an inference run (``<results>/<run_id>/inference.json``): what was asked,
where it ran, and what LoadGen's logs, the accuracy script and the harness's facts file said.
Validated on read like every stored file (`orchestrator.results.record_reader`): every number finite and
in its range (a damaged record's NaN or -1e308 metric was compared and reported as a result).

The run folder beside it is the MLPerf Inference results layout (`orchestrator.results.paths.InferencePaths`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from orchestrator.config.numbers import Finite, NonNegative, Percent, Positive
from orchestrator.results.records import ProfileName, Record

InferenceState = Literal["running", "finished", "failed", "interrupted"]


class Latency(Record):
    """LoadGen's latency statistics of a test, in nanoseconds."""

    min_ns: NonNegative | None = None
    mean_ns: NonNegative | None = None
    max_ns: NonNegative | None = None
    percentiles_ns: dict[str, NonNegative] = Field(default_factory=dict)
    """'50.00', '90.00', ... -> ns (per query for MultiStream)."""


class Performance(Record):
    """A performance test as LoadGen logged it (``mlperf_log_detail.txt``)."""

    scenario: str
    metric: str
    """The scenario's metric: samples/s (Offline, Server completed), or a latency percentile."""
    value: NonNegative | None
    unit: str
    higher_is_better: bool
    loadgen_valid: bool
    """LoadGen's own verdict (``result_validity``) on the settings it was given."""
    loadgen_reasons: tuple[str, ...] = ()
    """Why LoadGen said INVALID: its unmet conditions and recommendation, in its words."""
    errors: tuple[str, ...] = ()
    """LoadGen's error events."""
    latency_bound_met: bool | None = None
    """Server: LoadGen's ``result_perf_constraints_met`` (the latency percentile within the bound)."""
    latency: Latency = Latency()
    queries: NonNegativeInt | None = None
    samples_per_second: NonNegative | None = None
    effective: dict[str, Any] = Field(default_factory=dict)
    """LoadGen's ``effective_*`` settings."""


class Accuracy(Record):
    metric: str
    percent: Percent
    target_percent: Percent
    met: bool
    samples: int = Field(ge=0)
    line: str
    """The accuracy script's line (``accuracy.txt``)."""


class OperatorShare(Record):
    op: str
    calls: NonNegativeInt
    total_us: NonNegative
    share: Finite
    """Of the time the backend's operators took."""


class OperatorProfile(Record):
    """Where the time went (``--trace``): the top operators, and the share outside the model."""

    source: str
    file: str
    """The raw profile, relative to the run folder."""
    operators: tuple[OperatorShare, ...]
    operator_s: NonNegative
    predict_s: NonNegative
    """Time in the backend's calls (operators plus the runtime's own work)."""
    test_s: NonNegative
    """The tests' wall time while the profile was taken."""
    outside_model_share: Finite | None
    """1 - operator time / (test wall time x workers): pre/post-processing, queueing, the harness."""


class SearchTrial(Record):
    number: int = Field(ge=1)
    target_qps: Positive
    valid: bool
    """LoadGen's verdict."""
    passed: bool
    """What the search counts: LoadGen VALID under the mlperf profile; under a profile that shortens
    the tests (which then cannot meet the minimum duration or early stopping), the latency bound met."""
    reasons: tuple[str, ...] = ()
    completed_qps: NonNegative | None = None
    p99_ns: NonNegative | None = None
    folder: str
    """The trial's folder, relative to the run folder."""


class ServerSearch(Record):
    """The highest target QPS whose trial passed: bracketed, then bisected."""

    trials: tuple[SearchTrial, ...]
    best_qps: Positive | None
    """None: no trial was valid."""
    precision: Positive
    """The bisection stopped when the bracket was narrower than this fraction of its lower end."""


class Harness(Record):
    """What the harness's facts file said of itself."""

    backend: str
    device: str
    providers: tuple[str, ...]
    versions: dict[str, str] = Field(default_factory=dict)
    model_sha256: str = ""
    model_load_s: NonNegative
    total_inference_s: NonNegative
    """Model loading plus the last test over the data (the accuracy pass when there was one)."""
    preprocess_s: NonNegative
    max_batch: int = Field(ge=1)
    threads: int = Field(default=0, ge=0)
    """Intra-op threads per backend call, as the harness chose them (0: the backend's default)."""
    threads_source: str = ""
    """Why that many ('given', 'auto: ...'); empty in runs stored before it was recorded."""
    workers: int = Field(default=0, ge=0)
    """Threads calling the backend at once in Offline and Server (0: not recorded)."""
    workers_source: str = ""
    """Why that many ('given', 'auto: ...'); empty in runs stored before it was recorded."""
    samples: int = Field(ge=1)
    user_conf: dict[str, Positive] = Field(default_factory=dict)
    user_conf_sources: dict[str, str] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Settings changed beyond user.conf (--time, --count), as the reference's options do."""
    official: dict[str, Any] = Field(default_factory=dict)
    """The built-in mlperf.conf's values for this model and scenario, as LoadGen read them."""


class ComplianceTest(Record):
    """One MLPerf compliance test of the run (``--compliance``), verified by MLCommons' rules."""

    test: Literal["TEST01", "TEST04"]
    accuracy_passed: bool | None = None
    """TEST01: its logged responses agree with the accuracy run's; None for TEST04."""
    performance_passed: bool
    """Its score within the rules' margin of the run's (TEST04: not faster than it)."""
    folder: str
    """Its logs and verify_*.txt reports, relative to the run folder."""


class InferenceResult(Record):
    valid: bool
    """An MLPerf-valid result: LoadGen VALID, every official minimum met, the accuracy target met."""
    reasons: tuple[str, ...] = ()
    """Why not (LoadGen's, then the official minimums, then accuracy)."""
    official_gaps: tuple[str, ...] = ()
    """Where the run fell short of what mlperf.conf and the rules fix."""
    performance: Performance | None = None
    accuracy: Accuracy | None = None
    harness: Harness
    trace: OperatorProfile | None = None
    """Where the time went (--trace)."""
    search: ServerSearch | None = None
    compliance: tuple[ComplianceTest, ...] = ()
    """The compliance tests run with it (``--compliance``)."""


class InferenceRun(Record):
    """``inference.json``: one model, one scenario, on one setup."""

    kind: Literal["inference"] = "inference"
    run_id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    harness: str
    profile: ProfileName
    label: str | None = None
    scenario: str
    backend: str
    device: str
    accuracy_requested: bool
    tests: tuple[Literal["performance", "accuracy"], ...] = ("performance",)
    """LoadGen's tests, in the order they ran: performance alone, performance then accuracy
    (``--accuracy``), or accuracy alone (``--accuracy-only``, as the reference's ``--accuracy`` runs)."""
    count: PositiveInt | None = None
    time_s: Positive | None = None
    target_qps: str | None = None
    target_latency_ms: str | None = None
    trace: bool = False
    search: bool = False
    compliance: bool = False
    """--compliance: MLPerf's audit tests (TEST01, TEST04 as the model needs them) ran after the run."""
    model_file: str
    model_sha256: str
    model_source: str | None = None
    """The training run and seed the model was exported from ('RUN seed N'); None: a model file given."""
    data_dir: str
    runner: str
    host: str = ""
    command: tuple[str, ...] = ()
    started_at: str
    ended_at: str | None = None
    state: InferenceState
    failure: str | None = None
    """Why the run has no result (the harness's last line, a runner fault)."""
    system: dict[str, Any] = Field(default_factory=dict)
    runner_provenance: dict[str, Any] = Field(default_factory=dict)
    result: InferenceResult | None = None

    @property
    def setup_name(self) -> str:
        return self.label or self.run_id

    @property
    def passed(self) -> bool:
        """The run's verdict under its profile: the one rule of its exit code and of ``list``'s valid column.
        mlperf: an MLPerf-valid result. qualify: LoadGen's verdict on the settings the profile asked for, and
        the accuracy target. smoke: the pipeline ran end to end (the performance test measured, the accuracy
        target met); LoadGen's verdict on a 3 s test beyond the rules is said beside it, not failed on (on a
        busy host it is the host's). --accuracy-only: its one test's target."""
        result = self.result
        if result is None or self.state != "finished":
            return False
        accuracy_met = result.accuracy is None or result.accuracy.met
        if result.performance is None:  # --accuracy-only: its one test
            return result.accuracy is not None and result.accuracy.met
        if self.profile == "mlperf":
            return result.valid
        if self.profile == "smoke":
            return result.performance.value is not None and accuracy_met
        return result.performance.loadgen_valid and accuracy_met
