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

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workloads.common import atomic
from workloads.common.cpus import threads_per_process, usable_cpus
from workloads.inference import backends, compliance, facts
from workloads.inference import settings as lg_settings
from workloads.inference.errors import HarnessError
from workloads.inference.models import find
from workloads.inference.models.common import ACCURACY_FILE, read_accuracy_log
from workloads.inference.sut import INLINE_SCENARIOS, Batching, Samples, Server, batch_axis

MODES = {"performance": ("performance",), "accuracy": ("accuracy",), "both": ("performance", "accuracy")}
PERFORMANCE_DIR = Path("performance") / "run_1"
ACCURACY_DIR = Path("accuracy")
AUTO = "auto"
NO_AUDIT = "no-audit.config"
"""The audit file a test that is not a compliance test names (absent: LoadGen then reads none)."""


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
    extra: dict[str, Any] = field(default_factory=dict)


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise HarnessError(f"{what} {text!r}: give a positive number or auto") from None
    if not value > 0:
        raise HarnessError(f"{what} {text!r}: give a positive number or auto")
    return value


WARM_UP_CALLS = (6, 4)
"""Single-sample and full-batch calls of the warm-up (the first of each untimed); a model module's
``WARM_UP_CALLS`` replaces it (a whole 3D volume per call)."""


def warm_up(server: Server, samples: Samples, count: int, calls: tuple[int, int] = WARM_UP_CALLS) -> dict[str, float]:
    """Single-sample calls and full batches through the model, after the first of each: the latency
    and throughput the 'auto' targets take (LoadGen's query generation needs a rough expectation)."""
    indices = list(range(min(count, server.max_batch)))
    samples.load(indices)
    timings: dict[str, list[float]] = {"single": [], "batch": []}
    for name, chosen, repeats in (("single", indices[:1], calls[0]), ("batch", indices, calls[1])):
        if name == "batch" and len(indices) == 1:
            timings["batch"] = timings["single"]
            break
        for _ in range(max(repeats, 1)):
            started = time.perf_counter()
            server.compute(chosen)
            timings[name].append(time.perf_counter() - started)
    samples.unload(indices)
    latency = statistics.median(timings["single"][1:] or timings["single"])
    batch = statistics.median(timings["batch"][1:] or timings["batch"])
    return {"latency_ms": latency * 1000, "batch_ms": batch * 1000, "throughput_qps": len(indices) / batch}


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


def user_values(options: Options, module: Any, measured: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """user.conf values and, per value, where it came from."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    given = {"target_qps": options.target_qps, "target_latency": options.target_latency_ms}
    for key, text in given.items():
        if text is None or options.scenario not in lg_settings.USER_KEYS[key]:
            continue
        if text == AUTO:
            # LoadGen generates the queries of a test from these: too high a QPS (Offline) or too low a
            # latency only makes the test run past its duration; the other way round it ends too soon.
            share = {"Server": 0.5, "Offline": 2.0}.get(options.scenario, 0.5)
            if key == "target_qps":
                values[key] = round(measured["throughput_qps"] * share, 3)
                sources[key] = f"auto: {share:g} x the warm-up throughput"
            else:
                batch = "batch_ms" if options.scenario == "MultiStream" else "latency_ms"
                values[key] = round(measured[batch] * share, 3)
                sources[key] = f"auto: {share:g} x the warm-up latency"
        else:
            values[key], sources[key] = _number(text, f"--{key.replace('_', '-')}"), "given"
    return values, sources


def intra_op_threads(options: Options, cpus: int, host_cpus: int) -> tuple[int, str]:
    """The backend's intra-op threads per call, and why. Given; or, on the CPU, where the workers call
    the backend at once (Offline, Server), the ``cpus`` this process may use shared among them (two
    ONNX Runtime thread pools of the default size, spinning on the same 2 CPUs, ran Offline 20%
    slower than one thread each); or, one call at a time, the backend's own default unless the
    process may use fewer CPUs than the host has (a container's quota, a binding), then those."""
    if options.threads < 0:
        raise HarnessError(f"--threads {options.threads}: give 0 (chosen for you) or a positive count")
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


def run_tests(lg: Any, options: Options, server: Server, samples: Samples, settings: Any, count: int,
              sample_count: int, audit_file: Path | None = None) -> dict[str, Any]:
    """LoadGen's tests of ``options.mode`` in turn, each logging into its folder; per test its time and
    where it went."""
    sut = lg.ConstructSUT(server.issue, server.flush)
    qsl = lg.ConstructQSL(count, sample_count, samples.load, samples.unload)
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
            server.raise_failure(mode)
            tests[mode] = {"test_s": time.perf_counter() - started, **server.reset().to_json()}
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return tests


def run(options: Options) -> dict[str, Any]:
    """Run the tests; return the facts written to ``harness.json``."""
    import mlperf_loadgen as lg

    if options.mode not in MODES:
        raise HarnessError(f"unknown mode {options.mode!r}: performance, accuracy or both")
    module = find(options.model_name)
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
                            trace_dir=trace_dir)
    if hasattr(model, "check_input"):
        model.check_input(backend.loaded.input_shape)
    batches, batch_source = batching(options, module, backend.loaded.input_shape, options.model.name)
    samples = Samples(model)
    server = Server(lg, model, backend, samples, scenario=options.scenario, batching=batches, workers=options.workers)
    try:
        measured = warm_up(server, samples, model.count, getattr(module, "WARM_UP_CALLS", WARM_UP_CALLS))
        values, sources = user_values(options, module, measured)
        requested = lg_settings.Requested(conf_model=module.CONF_MODEL, scenario=options.scenario, user_conf=values,
                                          time_s=options.time_s, count=options.count,
                                          min_query_count=options.min_query_count, conf_round=module.ROUND)
        settings, overrides = lg_settings.build(lg, requested, options.out / "user.conf")
        sample_count = settings.performance_sample_count_override or model.count
        if sample_count > model.count:  # LoadGen would load the same samples again to make up the number
            settings.performance_sample_count_override = sample_count = model.count
            overrides["performance_sample_count_override"] = model.count
        audit_file = None
        if options.audit is not None:
            if options.mode != "performance":
                raise HarnessError(f"--audit {options.audit} runs LoadGen's performance test: give --mode performance")
            audit_file = options.out / "audit.config"
            atomic.write_text(audit_file, compliance.audit_config_text(options.audit, module, options.scenario))
        tests = run_tests(lg, options, server, samples, settings, model.count, sample_count, audit_file)
    finally:
        server.close()
    accuracy = None
    if "accuracy" in tests:
        folder = options.out / ACCURACY_DIR
        accuracy = model.accuracy(read_accuracy_log(folder / ACCURACY_FILE))
        atomic.write_text(folder / "accuracy.txt", accuracy.line + "\n")
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
                           official=lg_settings.official(lg, module.CONF_MODEL, options.scenario, module.ROUND),
                           conf_round=module.ROUND,
                           user_conf=values, user_conf_sources=sources, overrides=overrides, warm_up=measured,
                           tests=tests, preprocess_s=samples.preprocess_s, accuracy=accuracy,
                           max_batch=batches.max_batch, batch_source=batch_source, threads=threads,
                           threads_source=threads_source,
                           samples=model.count, trace_file=trace_file, operators=operators,
                           dataset=model.dataset_facts() if hasattr(model, "dataset_facts") else None,
                           audit=audited)
    atomic.write_json(options.out / facts.FACTS_FILE, record)
    return record
