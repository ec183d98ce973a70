"""One harness invocation: load the model, warm up, make LoadGen's settings, run the performance
test and/or the accuracy test, score the accuracy log, write the facts file.

The results folder it fills (``--out``), in the MLPerf Inference results layout::

    user.conf                      what the run wrote for LoadGen (beside the built-in mlperf.conf)
    performance/run_1/             mlperf_log_summary.txt, mlperf_log_detail.txt (LoadGen's)
    accuracy/                      the same, mlperf_log_accuracy.json, accuracy.txt (the script's line)
    trace/                         the backend's per-operator profile (--trace)
    harness.json                   the facts file (workloads.inference.facts)
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workloads.common import atomic
from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.common.memory import available_bytes
from workloads.inference import backends, compliance, facts
from workloads.inference import settings as lg_settings
from workloads.inference.errors import HarnessError
from workloads.inference.models import find
from workloads.inference.models.common import ACCURACY_FILE, read_accuracy_log
from workloads.inference.sut import INLINE_SCENARIOS, Batching, Samples, Server, batch_axis, from_loadgen

MODES = {"performance": ("performance",), "accuracy": ("accuracy",), "both": ("performance", "accuracy")}
PERFORMANCE_DIR = Path("performance") / "run_1"
ACCURACY_DIR = Path("accuracy")
AUTO = "auto"
NO_AUDIT = "no-audit.config"
"""The audit file a test that is not a compliance test names (absent: LoadGen then reads none)."""
WARM_UP_SHARE, WARM_UP_MIN_S, WARM_UP_MAX_S = 0.05, 2.0, 10.0
"""The warm-up runs the test's own path for 5% of the test's duration, from 2 s to 10 s."""
RAMP_S = 0.5
"""How long the workers take to reach their pace (measured: about 0.45 s on a 2-CPU machine), not timed."""
AUTO_SHARE = {"Server": 0.5, "Offline": 1.25}
"""Of the warm-up's sustained throughput, the auto target QPS: Offline's query must last the whole
test should the test run faster than the warm-up (on a shared 2-CPU machine, up to 20% faster; LoadGen's
own slack is 10%), so the test runs about 1.4 x its duration; Server at half the rate keeps its
latencies bounded."""
AUTO_LATENCY_SHARE = 0.5
"""Of the warm-up's latency, the auto target latency: LoadGen plans twice the queries a test needs,
so that a faster test still reaches its minimum duration."""
RUNS_LONG = 2.0
"""A test expected to run this many times its duration, or longer, is said to before it starts (an
auto Offline target plans 1.4 x)."""


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything one invocation is told (the command line, `workloads.inference.__main__`)."""

    model_name: str
    model: Path
    data: Path
    out: Path
    scenario: str
    backend: str = "onnxruntime"
    device: str = "cpu"
    mode: str = "performance"
    count: int | None = None
    time_s: float | None = None
    min_query_count: int | None = None
    target_qps: str | None = None
    """A number, 'auto' (measured in the warm-up) or None (mlperf.conf's placeholder)."""
    target_latency_ms: str | None = None
    max_batch: int | None = None
    threads: int = 0
    workers: int = 2
    trace: bool = False
    image_size: tuple[int, int] | None = None
    label_offset: int | None = None
    audit: str | None = None
    """A compliance test (TEST01, TEST04): its audit.config given to LoadGen's performance test."""
    profile: str = ""
    """The orchestrator's profile name, recorded only."""
    trust_model: bool = False
    """The model file may run code as it loads (a torch.export program): its user vouches for it."""
    reference_accuracy: bool = False
    """With the accuracy test: the model file's own FP32 accuracy on the same samples (`reference_accuracy`)."""
    extra: dict[str, Any] = field(default_factory=dict)


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise HarnessError(f"{what} {text!r}: give a positive number or auto") from None
    if not (math.isfinite(value) and value > 0):
        raise HarnessError(f"{what} {text!r}: give a positive number or auto")
    return value


WARM_UP_CALLS = (6, 4)
"""Single-sample and full-batch calls of the warm-up (the first of each untimed); a model module's
``WARM_UP_CALLS`` replaces it (a whole 3D volume per call)."""


class Rehearsal:
    """What `Server` calls of LoadGen, standing in for it in the warm-up: the answers are counted, so
    that the warm-up times the test's own path (gathering, the workers, the responses)."""

    def __init__(self) -> None:
        self.answered = 0
        self.done = threading.Condition()

    @staticmethod
    def QuerySampleResponse(query_id: int, data: int, size: int) -> None:  # noqa: N802 - LoadGen's name
        return None

    def QuerySamplesComplete(self, responses: list[Any]) -> None:  # noqa: N802 - LoadGen's name
        with self.done:
            self.answered += len(responses)
            self.done.notify_all()

    def wait_for(self, answered: int) -> None:
        with self.done:
            self.done.wait_for(lambda: self.answered >= answered)


@dataclass(frozen=True)
class Query:
    """A query sample as the SUT reads LoadGen's: its id and its sample's index."""

    id: int
    index: int


def warm_up_seconds(test_s: float) -> float:
    return min(max(WARM_UP_MIN_S, WARM_UP_SHARE * test_s), WARM_UP_MAX_S)


def warm_up(model: Any, backend: backends.Backend, samples: Samples, batches: Batching, *, scenario: str, count: int,
            workers: int, seconds: float, calls: tuple[int, int] = WARM_UP_CALLS) -> dict[str, float]:
    """Sustained timings of the test's own path, after a first call of each kind: a single sample
    and a batch answered in the caller's thread (the latency targets, at least ``calls`` of each and an
    eighth of ``seconds``), then, where the ``scenario`` has workers (Offline, Server), work through
    them for the rest of ``seconds``, their ramp not timed (the throughput target): batches, or for a
    model whose calls are slow (a whole 3D volume per call) rounds of one call per worker at once, as
    the test runs them (one call at a time measured 1.41 samples/s where the test's two workers ran
    2.62). A model whose samples differ in cost (``Model.cost``: 3D-UNet's windows per case) has the
    rate scaled from the samples timed to the mean of the dataset's. What LoadGen's schedule is
    planned from: a rate measured on one small batch once planned a "60 s" Offline test that ran 662 s."""
    stand_in = Rehearsal()
    inline = Server(stand_in, model, backend, samples, scenario="SingleStream", batching=batches, workers=1)
    rows = list(range(min(count, 2 * inline.max_batch)))
    samples.load(rows)
    ids = iter(range(1 << 62))

    def queries(n: int) -> list[Query]:
        return [Query(next(ids), rows[k % len(rows)]) for k in range(n)]

    def timed(n: int, least_s: float, least_calls: int) -> float:
        inline.issue(queries(n))  # the first call of a shape is slower: not timed
        times: list[float] = []
        started = time.perf_counter()
        while len(times) < max(least_calls, 1) or time.perf_counter() - started < least_s:
            call = time.perf_counter()
            inline.issue(queries(n))
            times.append(time.perf_counter() - call)
        return statistics.median(times)

    batched: Server | None = None
    try:
        single = timed(1, seconds / 8, calls[0] - 1)
        full_size = len(rows[:inline.max_batch])
        full = single if full_size == 1 else timed(full_size, seconds / 8, calls[1] - 1)
        rate, counted, elapsed = full_size / full, 0, 0.0
        if scenario not in INLINE_SCENARIOS:
            # the workers ramp up (their first calls, the allocator, the clocks): what comes after counts
            batched = Server(stand_in, model, backend, samples, scenario="Offline", batching=batches,
                             workers=workers)
            # six rounds of two calls per worker must fit: else rounds of one call per worker, each timed whole
            if not inline.per_sample and 12 * full <= seconds:
                rate, counted, elapsed = _sustained(batched, stand_in, queries, 2 * workers * inline.max_batch,
                                                    seconds)
            else:
                rate, counted, elapsed = _rounds(batched, stand_in, queries, max(1, workers) * inline.max_batch,
                                                 0.75 * seconds)
        rate *= _cost_scale(model, rows)
    finally:
        if batched is not None:
            batched.close()
        samples.unload(rows)
    inline.raise_failure("warm-up")
    if batched is not None:
        batched.raise_failure("warm-up")
    return {"latency_ms": single * 1000, "batch_ms": full * 1000, "throughput_qps": rate,
            "seconds": round(elapsed, 3), "samples": counted}


def _sustained(batched: Server, stand_in: Rehearsal, queries: Any, round_size: int,
               seconds: float) -> tuple[float, int, float]:
    """Rounds of batches kept in flight for most of ``seconds``, the first ones (the ramp) not counted."""
    issued, rounds, started, base = 0, 0, time.perf_counter(), stand_in.answered
    middle: tuple[float, int] | None = None
    while rounds < 6 or time.perf_counter() - started < 0.75 * seconds:
        batched.issue(queries(round_size))
        issued, rounds = issued + round_size, rounds + 1
        if middle is None and rounds >= 3 and time.perf_counter() - started >= min(RAMP_S, 0.375 * seconds):
            middle = (time.perf_counter(), stand_in.answered)
    stand_in.wait_for(base + issued)
    assert middle is not None
    elapsed, counted = time.perf_counter() - middle[0], base + issued - middle[1]
    return counted / elapsed, counted, elapsed


def _rounds(batched: Server, stand_in: Rehearsal, queries: Any, round_size: int,
            seconds: float) -> tuple[float, int, float]:
    """Rounds of one call per worker at once, each waited for, until ``seconds`` have passed (at least
    two rounds; the first, the workers' first calls, not counted)."""
    rounds, counted, elapsed = 0, 0, 0.0
    started = time.perf_counter()
    while rounds < 2 or time.perf_counter() - started < seconds:
        base, began = stand_in.answered, time.perf_counter()
        batched.issue(queries(round_size))
        stand_in.wait_for(base + round_size)
        if rounds:
            counted, elapsed = counted + round_size, elapsed + time.perf_counter() - began
        rounds += 1
    return counted / elapsed, counted, elapsed


def _cost_scale(model: Any, rows: list[int]) -> float:
    """The dataset's samples against those the warm-up timed, by the model's cost per sample (1 without one)."""
    cost = getattr(model, "cost", None)
    if not callable(cost) or not rows:
        return 1.0
    timed = statistics.fmean(cost(i) for i in rows)
    every = statistics.fmean(cost(i) for i in range(model.count))
    return timed / every if every > 0 and timed > 0 else 1.0


def batching(options: Options, module: Any, input_shape: tuple[Any, ...], name: str) -> tuple[Batching, str]:
    """Samples (or, for a per-sample model, windows) per backend call, and why: the model's fixed batch
    when its batch axis is fixed (a --max-batch that differs is refused), else --max-batch, else the
    reference's default for the model."""
    fixed = batch_axis(input_shape)
    if fixed is not None:
        if options.max_batch is not None and options.max_batch != fixed:
            raise HarnessError(f"--max-batch {options.max_batch}: {name} takes batches of exactly {fixed} "
                               "(its input's batch axis is fixed); export it with a free batch axis for more")
        return Batching(max_batch=fixed, fixed=fixed), f"the model's fixed batch axis ({fixed})"
    if options.max_batch is not None:
        return Batching(max_batch=options.max_batch), "given"
    return Batching(max_batch=module.MAX_BATCH), "the reference's default for the model"


def auto_targets(options: Options) -> list[str]:
    """The user.conf targets of this scenario that the warm-up measures."""
    given = {"target_qps": options.target_qps, "target_latency": options.target_latency_ms}
    return [key for key, text in given.items() if text == AUTO and options.scenario in lg_settings.USER_KEYS[key]]


def user_values(options: Options, module: Any,
                measured: dict[str, float] | None) -> tuple[dict[str, float], dict[str, str]]:
    """user.conf values and, per value, where it came from (``measured``: the warm-up, for auto)."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    given = {"target_qps": options.target_qps, "target_latency": options.target_latency_ms}
    for key, text in given.items():
        if text is None or options.scenario not in lg_settings.USER_KEYS[key]:
            continue
        if text == AUTO:
            if measured is None:
                raise HarnessError(f"{key} auto needs the warm-up's timings")
            # LoadGen generates the queries of a test from these: too high a QPS (Offline) or too low a
            # latency only makes the test run past its duration; the other way round it ends too soon.
            if key == "target_qps":
                share = AUTO_SHARE.get(options.scenario, 1.0)
                values[key] = round(measured["throughput_qps"] * share, 3)
                sources[key] = f"auto: {share:g} x the warm-up's sustained throughput"
            else:
                batch = "batch_ms" if options.scenario == "MultiStream" else "latency_ms"
                values[key] = round(measured[batch] * AUTO_LATENCY_SHARE, 3)
                sources[key] = f"auto: {AUTO_LATENCY_SHARE:g} x the warm-up latency"
        else:
            values[key], sources[key] = _number(text, f"--{key.replace('_', '-')}"), "given"
    return values, sources


def fitted(lg: Any, requested: lg_settings.Requested, sources: dict[str, str], user_conf: Path,
           ) -> tuple[Any, dict[str, Any], lg_settings.Schedule, dict[str, float]]:
    """LoadGen's settings, their overrides and schedule, the schedule within what this machine can
    hold (`settings.fits`): an auto target lowered to fit, and said so; a given one refused (exit 2)."""
    built, overrides = lg_settings.build(lg, requested, user_conf)
    plan = lg_settings.schedule(built, requested.scenario)
    available = available_bytes()
    if lg_settings.fits(plan, available):
        return built, overrides, plan, requested.user_conf
    key = "target_qps" if requested.scenario in lg_settings.USER_KEYS["target_qps"] else "target_latency"
    high, low = lg_settings.highest_qps(plan, available), lg_settings.lowest_qps(plan)
    if sources.get(key, "").startswith(AUTO) and plan.qps > high:
        value = high if key == "target_qps" else 1000 / high
        sources[key] += f", lowered to what LoadGen's schedule may take of this machine's memory ({value:.4g})"
        requested = replace(requested, user_conf={**requested.user_conf, key: round(value, 3)})
        built, overrides = lg_settings.build(lg, requested, user_conf)
        return built, overrides, lg_settings.schedule(built, requested.scenario), requested.user_conf
    if plan.planned_s > lg_settings.MAX_TEST_S:
        what = f"plan a test of {plan.planned_s:.3g} s, longer than {lg_settings.MAX_TEST_S // 86_400} days"
    else:
        what = (f"hold {plan.samples:,} samples, {plan.memory_bytes / 2**30:,.4g} GiB, where "
                f"{(available or 0) / 2**30:,.4g} GiB are available")
    if key == "target_qps":
        range_ = f"give --target-qps from {low:.4g} to {high:.4g}"
    else:
        range_ = f"give --target-latency-ms from {1000 / high:.4g} to {1000 / max(low, 1e-12):.4g}"
    raise HarnessError(f"{requested.scenario} at {plan.qps:.4g} queries/s over {plan.min_s:g} s: LoadGen would "
                       f"{what}; {range_}")


def expected_seconds(plan: lg_settings.Schedule, measured: dict[str, float], scenario: str) -> float:
    """How long the performance test should run at the warm-up's pace."""
    rate = measured["throughput_qps"]
    if scenario == "Offline":
        return plan.samples / rate
    if scenario == "Server":  # the queries it issues must be answered too
        return max(plan.planned_s, min(plan.samples, plan.qps * plan.planned_s) / rate)
    latency_s = measured["batch_ms" if scenario == "MultiStream" else "latency_ms"] / 1000
    return max(plan.min_s, plan.queries * latency_s)


def cut_short(settings: Any, measured: dict[str, float], scenario: str) -> str | None:
    """Why a one-query-at-a-time test (SingleStream, MultiStream) will stop at its time limit before
    LoadGen's minimum of queries, at the warm-up's latency (then INVALID: "min queries not met"); None
    when it will not."""
    if scenario not in INLINE_SCENARIOS or not settings.max_duration_ms:
        return None
    latency_s = measured["batch_ms" if scenario == "MultiStream" else "latency_ms"] / 1000
    limit_s, least = settings.max_duration_ms / 1000, int(settings.min_query_count)
    if latency_s <= 0 or limit_s / latency_s >= least:
        return None
    return (f"the {scenario} test stops at its {limit_s:g} s limit after about {limit_s / latency_s:,.0f} of the "
            f"{least:,} queries LoadGen requires ({latency_s * 1000:.4g} ms each in the warm-up): its result will "
            f"be INVALID (min queries not met); --time {math.ceil(1.2 * least * latency_s)} lets it finish")


def check_batch(samples: Samples, max_batch: int, workers: int) -> None:
    """The batches in flight (each worker's, and Offline's gathered ahead: 3 per worker) fit this
    machine's memory, one sample measured: a model with a fixed batch of 2^40 passed every other check."""
    samples.load([0])
    sample = samples.get(0).nbytes
    samples.unload([0])
    available = available_bytes()
    in_flight = 3 * max(1, workers) * max_batch * sample
    if available is not None and in_flight > lg_settings.MEMORY_SHARE * available:
        most = max(1, int(lg_settings.MEMORY_SHARE * available / (3 * max(1, workers) * sample)))
        raise HarnessError(f"a batch of {max_batch:,} samples ({sample / 2**20:.3g} MiB each, {3 * workers} batches "
                           f"in flight) needs {in_flight / 2**30:.3g} GiB; {available / 2**30:.3g} GiB are available "
                           f"here: give --max-batch from 1 to {most:,}")


def intra_op_threads(options: Options, cpus: int, host_cpus: int) -> tuple[int, str]:
    """The backend's intra-op threads per call, and why. Given; or, on the CPU, where the workers call
    the backend at once (Offline, Server), the ``cpus`` this process may use shared among them (two
    ONNX Runtime thread pools of the default size, spinning on the same 2 CPUs, ran Offline 20%
    slower than one thread each); or, one call at a time, the backend's own default unless the
    process may use fewer CPUs than the host has (a container's quota, a binding), then those."""
    if not 0 <= options.threads <= host_cpus:  # each thread has its stack: 100,000 of them took 6 GB
        raise HarnessError(f"--threads {options.threads}: give 0 (chosen for you) to {host_cpus}, the CPUs of "
                           "this machine")
    if options.threads:
        return options.threads, "given"
    if options.device != "cpu":
        return 0, "the backend's default (the model runs on the device)"
    if options.scenario not in INLINE_SCENARIOS:
        return threads_per_process(cpus, options.workers), f"auto: {cpus} usable CPU{'s' * (cpus != 1)} shared by " \
            f"{options.workers} workers"
    if cpus < host_cpus:
        return cpus, f"auto: the {cpus} CPUs this process may use (of {host_cpus})"
    return 0, "the backend's default (one call at a time)"


TRACE_FILE = "mlperf_log_trace.json"


def drop_empty(path: Path) -> None:
    """Remove ``path`` when it is an empty regular file (what LoadGen leaves of a trace it did not write)."""
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


def run_tests(lg: Any, options: Options, server: Server, samples: Samples, settings: Any, count: int,
              sample_count: int, audit_file: Path | None = None) -> dict[str, Any]:
    """LoadGen's tests of ``options.mode`` in turn, each logging into its folder; per test its time and
    where it went."""
    sut = lg.ConstructSUT(from_loadgen(server.issue), from_loadgen(server.flush))
    qsl = lg.ConstructQSL(count, sample_count, from_loadgen(samples.load), from_loadgen(samples.unload))
    tests: dict[str, Any] = {}
    try:
        for mode in MODES[options.mode]:
            folder = options.out / (PERFORMANCE_DIR if mode == "performance" else ACCURACY_DIR)
            folder.mkdir(parents=True, exist_ok=True)
            settings.mode = lg.TestMode.PerformanceOnly if mode == "performance" else lg.TestMode.AccuracyOnly
            log_settings = lg.LogSettings()
            log_settings.log_output.outdir = str(folder)
            log_settings.log_output.copy_summary_to_stdout = False
            # LoadGen's own trace (mlperf_log_trace.json) is on by default and grows with the test
            # (85 MB for one SingleStream run): written only when a trace is asked for, as the
            # reference writes it only under --debug.
            log_settings.enable_trace = options.trace
            started = time.perf_counter()
            # An audit.config in the working folder would silently turn a test into a compliance test:
            # LoadGen reads the one it is given (a compliance test's), else one that does not exist.
            audit = audit_file if audit_file is not None and mode == "performance" else folder / NO_AUDIT
            lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, str(audit))
            if not options.trace:  # LoadGen opens its trace file whether or not it writes to it
                drop_empty(folder / TRACE_FILE)
            server.raise_failure(mode)
            tests[mode] = {"test_s": time.perf_counter() - started, **server.reset().to_json()}
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return tests


def reference_accuracy(options: Options, model: Any, measured: Any, entries: list[tuple[int, bytes]]) -> dict[str, Any]:
    """The model file's own FP32 accuracy on the samples of the accuracy log, as MLPerf defines a reference
    accuracy (the reference model on the same data): the file run by its own runtime (ONNX Runtime for
    .onnx, torch for .pt2) on the CPU, one sample at a time. The accuracy run itself where it ran so."""
    how = f"{options.backend} on the CPU, FP32, the same {len(entries)} samples"
    if options.device == "cpu":
        return {"percent": measured.percent, "samples": measured.samples, "line": measured.line,
                "how": f"{how}: the accuracy run itself"}
    cpu = backends.load(options.backend, options.model, device="cpu", threads=0, trace_dir=None,
                        trust_model=options.trust_model)
    fixed = batch_axis(cpu.loaded.input_shape)
    samples = Samples(model)
    inline = Server(Rehearsal(), model, cpu, samples, scenario="SingleStream",
                    batching=Batching(max_batch=fixed or 1, fixed=fixed), workers=1)
    answers: list[tuple[int, bytes]] = []
    for index, _ in entries:
        samples.load([index])
        answers.append((index, inline.compute([index])[0].tobytes()))
        samples.unload([index])
    scored = model.accuracy(answers)
    return {"percent": scored.percent, "samples": scored.samples, "line": scored.line, "how": how}


def run(options: Options) -> dict[str, Any]:
    """Run the tests; return the facts written to ``harness.json``."""
    import mlperf_loadgen as lg

    if options.mode not in MODES:
        raise HarnessError(f"unknown mode {options.mode!r}: performance, accuracy or both")
    module = find(options.model_name)
    audit_text = None  # a compliance test refused before the model, the backend and the warm-up cost anything
    if options.audit is not None:
        if options.mode != "performance":
            raise HarnessError(f"--audit {options.audit} runs LoadGen's performance test: give --mode performance")
        audit_text = compliance.audit_config_text(options.audit, module, options.scenario)
    kwargs: dict[str, Any] = {"count": options.count}
    if options.image_size is not None:
        kwargs["image_size"] = options.image_size
    if options.label_offset is not None:
        kwargs["label_offset"] = options.label_offset
    model = module.Model(options.data, **kwargs)
    options.out.mkdir(parents=True, exist_ok=True)
    trace_dir = options.out / "trace" if options.trace else None
    threads, threads_source = intra_op_threads(options, usable_cpus(), os.cpu_count() or 1)
    backend = backends.load(options.backend, options.model, device=options.device, threads=threads,
                            trace_dir=trace_dir, trust_model=options.trust_model)
    if hasattr(model, "check_input"):
        model.check_input(backend.loaded.input_shape)
    batches, batch_source = batching(options, module, backend.loaded.input_shape, options.model.name)
    samples = Samples(model)
    check_batch(samples, batches.max_batch, options.workers)
    official = lg_settings.official(lg, module.CONF_MODEL, options.scenario, module.ROUND)
    test_s = options.time_s if options.time_s is not None else official["min_duration_ms"] / 1000

    def settled(measured: dict[str, float] | None) -> tuple[Any, dict[str, Any], lg_settings.Schedule,
                                                            dict[str, float], dict[str, str]]:
        values, sources = user_values(options, module, measured)
        requested = lg_settings.Requested(conf_model=module.CONF_MODEL, scenario=options.scenario, user_conf=values,
                                          time_s=options.time_s, count=options.count,
                                          min_query_count=options.min_query_count, conf_round=module.ROUND)
        return (*fitted(lg, requested, sources, options.out / "user.conf"), sources)

    given = None if auto_targets(options) else settled(None)  # a target given is refused before the warm-up
    measured = warm_up(model, backend, samples, batches, scenario=options.scenario, count=model.count,
                       workers=options.workers,
                       seconds=warm_up_seconds(test_s), calls=getattr(module, "WARM_UP_CALLS", WARM_UP_CALLS))
    settings, overrides, plan, values, sources = given or settled(measured)
    if "performance" in MODES[options.mode]:
        expected = expected_seconds(plan, measured, options.scenario)
        if expected > RUNS_LONG * plan.min_s:
            sys.stderr.write(f"inference: warning: the {options.scenario} test will run about {expected:.0f} s, "
                             f"not {plan.min_s:g} s: LoadGen planned {plan.samples:,} samples at "
                             f"{plan.qps:.4g} queries/s; this machine answered {measured['throughput_qps']:.4g} "
                             "samples/s in the warm-up\n")
            sys.stderr.flush()
        short = cut_short(settings, measured, options.scenario)
        if short:
            sys.stderr.write(f"inference: warning: {short}\n")
            sys.stderr.flush()
    server = Server(lg, model, backend, samples, scenario=options.scenario, batching=batches, workers=options.workers)
    try:
        sample_count = settings.performance_sample_count_override or model.count
        if sample_count > model.count:  # LoadGen would load the same samples again to make up the number
            settings.performance_sample_count_override = sample_count = model.count
            overrides["performance_sample_count_override"] = model.count
        audit_file = None
        if audit_text is not None:
            audit_file = options.out / "audit.config"
            atomic.write_text(audit_file, audit_text)
        tests = run_tests(lg, options, server, samples, settings, model.count, sample_count, audit_file)
    finally:
        server.close()
    accuracy = None
    if "accuracy" in tests:
        folder = options.out / ACCURACY_DIR
        accuracy = model.accuracy(read_accuracy_log(folder / ACCURACY_FILE))
        atomic.write_text(folder / "accuracy.txt", accuracy.line + "\n")
    reference = None
    if accuracy is not None and options.reference_accuracy:
        reference = reference_accuracy(options, model, accuracy, read_accuracy_log(options.out / ACCURACY_DIR /
                                                                                   ACCURACY_FILE))
    audited = None
    if options.audit is not None:
        audited = {"test": options.audit, "settings": compliance.audit_settings(options.audit, module)}
        logged = options.out / PERFORMANCE_DIR / ACCURACY_FILE
        if options.audit == "TEST01":  # the responses it logged, scored as the accuracy run's are
            entries = read_accuracy_log(logged)
            audited["accuracy"] = model.accuracy(entries).line if entries else None
            audited["logged_samples"] = len(entries)
    trace_file, operators = backend.stop_trace()
    record = facts.collect(options=options, backend=backend.loaded, conf_model=module.CONF_MODEL,
                           official=official,
                           conf_round=module.ROUND,
                           user_conf=values, user_conf_sources=sources, overrides=overrides, warm_up=measured,
                           tests=tests, preprocess_s=samples.preprocess_s, accuracy=accuracy,
                           max_batch=batches.max_batch, batch_source=batch_source, threads=threads,
                           threads_source=threads_source,
                           samples=model.count, trace_file=trace_file, operators=operators,
                           dataset=model.dataset_facts() if hasattr(model, "dataset_facts") else None,
                           audit=audited)
    if reference is not None:
        record["reference_accuracy"] = reference
    atomic.write_json(options.out / facts.FACTS_FILE, record)
    return record
