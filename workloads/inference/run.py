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
import sys
import time
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
from workloads.inference.options import Options
from workloads.inference.sut import (
    INLINE_SCENARIOS,
    Batching,
    Samples,
    Server,
    answers_per_sample,
    batch_axis,
    from_loadgen,
)
from workloads.inference.targets import RUNS_LONG, auto_targets, cut_short, expected_seconds, fitted, user_values
from workloads.inference.warmup import WARM_UP_CALLS, Rehearsal, warm_up, warm_up_seconds

MODES = {"performance": ("performance",), "accuracy": ("accuracy",), "both": ("performance", "accuracy")}
PERFORMANCE_DIR = Path("performance") / "run_1"
ACCURACY_DIR = Path("accuracy")
NO_AUDIT = "no-audit.config"
"""The audit file a test that is not a compliance test names (absent: LoadGen then reads none)."""


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


def worker_count(options: Options, *, per_sample: bool, cpus: int) -> tuple[int, str]:
    """The threads answering Offline and Server queries, and why. Given; or one where LoadGen's own
    thread answers (SingleStream, MultiStream); or one on the CPU for a model that answers a whole
    volume per sample (``per_sample``: 3D-UNet), its windows on every usable CPU, in LoadGen's issuing
    thread (`Server`), as the reference runs them: a second worker holds a second volume and the
    backend's activations at once, 1.57x and 1.60x the reference's peak against 0.91x for one, for
    1.03x and 1.08x the samples/s of one (quarter-width model, 4 cases, 2 CPUs, windows in NumPy, two
    rounds; `benchmarks/kits19_inference_memory.py`); else two, whose calls in flight keep the device
    busy while the other's inputs and outputs move."""
    if options.workers:
        return options.workers, "given"
    if options.scenario in INLINE_SCENARIOS:
        return 1, "LoadGen's thread answers each query"
    if per_sample and options.device == "cpu":
        return 1, (f"auto: one worker, a whole volume at a time on the {cpus} usable CPU{'s' * (cpus != 1)}, as the"
                   " reference runs it (a second holds a second volume: --workers 2)")
    return 2, f"auto: two workers in flight, backend calls ({cpus} usable CPU{'s' * (cpus != 1)})"


def intra_op_threads(options: Options, cpus: int, host_cpus: int, workers: int) -> tuple[int, str]:
    """The backend's intra-op threads per call, and why. Given; or, on the CPU, where the ``workers``
    call the backend at once (Offline, Server), the ``cpus`` this process may use shared among them (two
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
        return threads_per_process(cpus, workers), f"auto: {cpus} usable CPU{'s' * (cpus != 1)} shared by " \
            f"{workers} worker{'s' * (workers != 1)}"
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
    cpus = usable_cpus()
    workers, workers_source = worker_count(options, per_sample=answers_per_sample(model), cpus=cpus)
    threads, threads_source = intra_op_threads(options, cpus, os.cpu_count() or 1, workers)
    backend = backends.load(options.backend, options.model, device=options.device, threads=threads,
                            trace_dir=trace_dir, trust_model=options.trust_model)
    if hasattr(model, "check_input"):
        model.check_input(backend.loaded.input_shape)
    batches, batch_source = batching(options, module, backend.loaded.input_shape, options.model.name)
    samples = Samples(model)
    check_batch(samples, batches.max_batch, workers)
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
                       workers=workers,
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
    server = Server(lg, model, backend, samples, scenario=options.scenario, batching=batches, workers=workers)
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
                           threads_source=threads_source, workers=workers, workers_source=workers_source,
                           samples=model.count, trace_file=trace_file, operators=operators,
                           dataset=model.dataset_facts() if hasattr(model, "dataset_facts") else None,
                           audit=audited)
    if reference is not None:
        record["reference_accuracy"] = reference
    atomic.write_json(options.out / facts.FACTS_FILE, record)
    return record
