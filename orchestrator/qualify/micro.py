"""Microbenchmarks: the probe (workloads/common/probe/, shipped with the workloads) run through the
runner as the command ``qualify.yaml`` names, its lines (`probe_lines`) turned into checks, one per
probe check of the registry (`orchestrator.qualify.checks`).

Sanity and performance stay apart, as in ReFrame: a check's sanity is whether each case computed
the right thing and none raised (a wrong result FAILs it whatever its speed, and its number is not a
measurement: nothing judges the speed of a wrong answer); its measurements are the numbers of the
cases that were right, judged later against references (`judge`).

One job runs every probe check of an attempt, each within its own timeout: a watchdog follows which
check is running (the probe prints each one's timing line when it is done, in the order it was
given) and stops the job when one overruns; that check is INCONCLUSIVE, named with its timeout,
and the probe is started again for the checks after it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import text
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.qualify import remedies
from orchestrator.qualify.checks.base import Overran, job_facts, overran
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.qualify.checks.probe_declared import PROBE_PACKAGE
from orchestrator.qualify.config import DeviceKind, ProbeSettings, Suite
from orchestrator.qualify.devices import Gpu, gpu_metric, split_metric
from orchestrator.qualify.probe_lines import CaseResult, ProbeRun
from orchestrator.results.qualification import CheckResult, Measurement, Remediation, Remedy, Status
from orchestrator.results.records import Exit
from orchestrator.runners import resource_errors
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import run_job
from orchestrator.runners.outcome import JobOutcome

if TYPE_CHECKING:
    from orchestrator.qualify.checks.context import NodeContext
    from orchestrator.qualify.checks.registry import Registry

CONFIG_ENV = "MLTRAIN_PROBE_CONFIG"
"""Where the probe reads its settings (JSON): workloads/common/probe/settings.py."""
START_S = 300.0
"""How long the probe may take to say what it runs on (torch imported, CUDA started) before it is
stopped, at most: its start counts against its first check's timeout, so a check's shorter timeout
stops a probe that hangs before it said anything as soon (`start_limit`)."""
KINDS: tuple[DeviceKind, ...] = ("cpu", "cuda")


def probe_config(suite: Suite, checks: Sequence[Declaration], *, data: bool = False) -> dict[str, Any]:
    """The probe's settings: both device kinds' (it picks the one it finds), the order of checks, the
    modules of checks registered outside the probe's package, and whether ``DATADIR`` holds a dataset."""
    config: dict[str, Any] = {"seconds_per_case": suite.probe_seconds_per_case, "order": [d.name for d in checks],
                              "data": data}
    modules = {d.name: d.module for d in checks if d.module and not d.module.startswith(f"{PROBE_PACKAGE}.")}
    if modules:
        config["modules"] = modules
    for kind in KINDS:
        device = suite.device(kind)
        config[kind] = {d.name: found.model_dump(mode="json", exclude={"timeout_minutes"}) for d in checks
                        if (found := device.settings(d.name)) is not None}
    return config


def timeout(declaration: Declaration, suite: Suite, kind: DeviceKind) -> float:
    """Seconds a probe check may run on ``kind``: its settings', else the suite's probe_timeout_minutes,
    else its declared timeout."""
    settings = suite.device(kind).settings(declaration.name)
    if getattr(settings, "timeout_minutes", None) is None and suite.probe_timeout_minutes is not None:
        return suite.probe_timeout_minutes * 60
    return declaration.timeout(settings)


def wanted(registry: Registry, suite: Suite, probe: ProbeSettings, names: Sequence[str] | None = None
           ) -> list[Declaration]:
    """The probe checks the suite gives settings on either kind of device (of ``names``, if given), in
    the probe's order (qualify.yaml ``probe.checks``)."""
    found = []
    for name in probe.checks:
        declaration = registry.declaration(name)
        if declaration is not None and suite.wants(name) and (names is None or name in names):
            found.append(declaration)
    return found


def start_limit(first: str, timeouts: Mapping[str, Mapping[str, float]]) -> float:
    """Seconds the probe may take to say what it runs on: `START_S`, or less where its first check's
    timeout (the longest over the kinds of device, which it has not named yet) is shorter."""
    return min([START_S, max((t[first] for t in timeouts.values() if first in t), default=START_S)])


class _Watchdog:
    """Called while the probe runs: stops it (`Overran`) at its start-up limit or when the check it
    is running passes its timeout."""

    def __init__(self, run: ProbeRun, timeouts: Mapping[str, Mapping[str, float]], first: str) -> None:
        self.run, self.timeouts, self.started = run, timeouts, time.monotonic()
        self.start_s = start_limit(first, timeouts)

    def __call__(self) -> None:
        now = time.monotonic()
        if not self.run.device:
            if now - self.started > self.start_s:
                raise Overran("the probe's start", self.start_s)
            return
        running = self.run.running
        if running is None:
            return
        name, since = running
        limit = self.timeouts.get(self.run.device_kind or "cpu", {}).get(name)
        if limit is not None and now - since > limit:
            raise Overran(name, limit)


def run_probe(
    runner: Runner, *, checks: Sequence[Declaration], suite: Suite, probe: ProbeSettings, workload: Workload,
    run_id: str, data_dir: Path, folder: Path, data: bool = False,
    on_event: Callable[[dict[str, Any]], None] = lambda event: None,
) -> ProbeRun:
    """Run the probe on ``runner`` as a step of qualification ``run_id`` (in ``folder``): a job whose
    command is the one qualify.yaml names, running ``checks`` in order, each within its timeout (a
    check that overruns is stopped and recorded, and the probe starts again in ``folder-<n>`` for the
    checks after it). A runner that refuses it, or cannot start it, is recorded, not raised."""
    run = ProbeRun(on_event=on_event)
    pending = list(checks)
    part = 1
    while pending:
        where = folder if part == 1 else folder.with_name(f"{folder.name}-{part}")
        stopped = _run_part(run, runner, pending, suite=suite, probe=probe, workload=workload, run_id=run_id,
                            data_dir=data_dir, folder=where, data=data)
        if stopped is None or stopped not in [d.name for d in pending]:
            break
        pending = pending[[d.name for d in pending].index(stopped) + 1:]
        part += 1
    return run


def _run_part(run: ProbeRun, runner: Runner, checks: Sequence[Declaration], *, suite: Suite, probe: ProbeSettings,
              workload: Workload, run_id: str, data_dir: Path, folder: Path, data: bool) -> str | None:
    """One probe job running ``checks``; the name of the check it was stopped in (None: it ended)."""
    timeouts = {kind: {d.name: timeout(d, suite, kind) for d in checks} for kind in KINDS}
    limit = START_S + max(sum(t.values()) for t in timeouts.values()) + 60
    spec = JobSpec(kind="step", name="probe", run_id=run_id, bundle=workload, command=probe.command,
                   args=(str(probe.seed),), env={CONFIG_ENV: json.dumps(probe_config(suite, checks, data=data))},
                   data_dir=data_dir, folder=folder, declared="the probe's command (qualify.yaml `probe:`)")
    names = tuple(d.name for d in checks)
    run.expect(names)
    started = time.monotonic()
    try:
        outcome = run_job(runner, spec, timeout_s=limit, on_line=run.observe,
                          on_tick=_Watchdog(run, timeouts, names[0]))
    except MltrainError as exc:
        run.failure = run.failure or str(exc)
        return None
    except Overran as exc:
        stopped = JobOutcome(job_id="", exit=Exit(code=None, detail=str(exc)), timed_out=True, lost="",
                             seconds=time.monotonic() - started, log=spec.paths.output)
        run.ended(names, stopped)
        if exc.name not in names:  # it never started: the checks it was to run could not
            within = text.duration(exc.seconds * 1000)
            why = "" if exc.seconds >= START_S else f" ({names[0]}'s timeout; the probe's start counts in it)"
            for name in names:
                run.overran[name] = f"the probe did not say what it runs on within {within}{why}: stopped"
            return None
        run.overran[exc.name] = overran(exc.name, exc.seconds)
        return exc.name
    run.ended(names, outcome)
    return None


def probe_for(ctx: NodeContext) -> ProbeRun:
    """The probe's run of this attempt: every probe check of it the suite runs, in one job (with the
    progress said check by check, and its timings kept on the first attempt)."""
    plan = ctx.plan
    checks = wanted(plan.checks, plan.suite, plan.config.probe, ctx.names)
    if not checks:
        return ProbeRun()
    if ctx.prepare_error:
        return ProbeRun(failure=ctx.prepare_error)
    names = [d.name for d in checks]
    watch = ctx.watch
    if ctx.repeat:
        watch.status(f"  repeat {ctx.attempt}: probe ({', '.join(names)})")
    else:
        watch.status(f"microbenchmarks ({', '.join(names)}) through the {ctx.runner.name} runner ...")
    done: list[str] = []

    def progress(event: dict[str, Any]) -> None:
        if ctx.repeat:
            return
        if event.get("kind") == "device":
            watch.status(f"  probe on {event.get('device')} ({event.get('device_name')}), torch {event.get('torch')}")
        elif event.get("kind") == "timing":
            done.append(str(event.get("check")))
            watch.status(f"  [{len(done)}/{len(names)}] {event.get('check')} done in {event.get('seconds', 0):.1f} s")
        elif event.get("kind") == "result":
            performance, sanity = event["performance"], event["sanity"]
            watch.detail(f"    {event.get('metric')}: {text.number(performance['value'])} {performance.get('unit')}"
                         + ("" if sanity["passed"] else f" WRONG RESULT ({sanity.get('detail')})"))

    started = time.monotonic()
    run = run_probe(ctx.runner, checks=checks, suite=plan.suite, probe=plan.config.probe, workload=plan.workload,
                    run_id=ctx.run_id, data_dir=plan.data or ctx.scratch, folder=ctx.folder / "probe",
                    data=plan.data is not None, on_event=progress)
    for name, why in run.overran.items():
        watch.status(f"  {name}: {why}")
    if not ctx.repeat:
        elapsed = time.monotonic() - started
        watch.timings["probe_total"] = elapsed
        watch.timings["probe_startup"] = max(elapsed - sum(run.timings.values()), 0.0)
        watch.timings.update(run.timings)
    return run


def probe_checks(probe: ProbeRun, suite: Suite, registry: Registry, gpus: Mapping[int, Gpu] | None = None,
                 settings: ProbeSettings | None = None) -> list[CheckResult]:
    """One result per probe check the suite asks for, unjudged (measurements carry no reference yet).
    ``gpus``: CUDA index -> the NVML GPU it is, which names per-GPU cases by NVML's index."""
    order = settings or ProbeSettings.model_validate({}, context={"checks": registry})
    return [probe_check(d, probe, suite, gpus or {}) for d in wanted(registry, suite, order)]


def _gpu_named(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> tuple[str, str]:
    """(metric, GPU label) of a case, named for the GPU that ran it: a per-GPU case (``<metric>_gpu<i>``
    or ``gpu`` i, CUDA's index) as ``<metric>_gpu<NVML index>``; a case of cuda:0 keeps its name. The
    label is "" where the case is not one GPU's, ``cuda:<i>`` where NVML's GPU is unknown."""
    base, cuda, found = _ran_on(metric, gpu, probe, gpus)
    if cuda is None:
        return metric, found.label if found is not None else ""
    return (gpu_metric(base, found.index), found.label) if found is not None else (metric, f"cuda:{cuda}")


def _ran_on(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> tuple[str, int | None, Gpu | None]:
    """(metric without its ``_gpu<i>``, CUDA's index of the GPU that ran a case (None: not a per-GPU
    case), the NVML GPU that ran it: that index's, or CUDA's GPU 0 for a case of a CUDA device that
    is not per-GPU; None: unknown, or on the CPU)."""
    base, cuda = split_metric(metric)
    if isinstance(gpu, int) and not isinstance(gpu, bool):
        cuda = gpu
    if cuda is not None:
        return base, cuda, gpus.get(cuda)
    return base, None, gpus.get(0) if probe.device_kind == "cuda" else None


def _measurement(result: CaseResult, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> Measurement:
    """A right case's performance, as a measurement to judge."""
    metric, device = _gpu_named(result.metric, result.gpu, probe, gpus)
    performance = result.performance
    return Measurement(metric=metric, value=performance.value, unit=performance.unit, better=performance.better,
                       detail=performance.detail, device=device)


def _gpu_index(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> int | None:
    """NVML's index of the GPU that ran a case (None: not one GPU's, or unknown)."""
    found = _ran_on(metric, gpu, probe, gpus)[2]
    return found.index if found is not None else None


def _remedies(declaration: Declaration, wrong: Sequence[CaseResult], errors: Sequence[dict[str, Any]],
              probe: ProbeRun, gpus: Mapping[int, Gpu]) -> tuple[Remediation, ...]:
    """What the wrong results and the errors of a probe check ask for, on the GPU that gave each."""
    fallback = declaration.remedies.wrong or Remedy.INVESTIGATE
    found = [Remediation(action=fallback, check=declaration.name, gpu=_gpu_index(r.metric, r.gpu, probe, gpus))
             for r in wrong]
    for error in errors:
        gpu = _gpu_index(str(error.get("metric")), error.get("gpu"), probe, gpus)
        found += remedies.from_text(str(error.get("error", "")), declaration.name, gpu) or [
            Remediation(action=fallback, check=declaration.name, gpu=gpu)]
    return remedies.ordered(found)


def _on(metric: str, gpu: Any, probe: ProbeRun, gpus: Mapping[int, Gpu]) -> str:
    """A case's metric for a reason, with the GPU that ran it."""
    named, device = _gpu_named(metric, gpu, probe, gpus)
    return f"{named} on {device}" if device else named


def probe_check(declaration: Declaration, probe: ProbeRun, suite: Suite, gpus: Mapping[int, Gpu]) -> CheckResult:
    """The result of probe check ``declaration`` from what the probe said, unjudged."""
    name = declaration.name
    seconds = probe.timings.get(name, 0.0)

    def result(status: Status, reasons: list[str], **extra: Any) -> CheckResult:
        return CheckResult(name=name, kind=declaration.kind, status=status, sanity=status, reasons=tuple(reasons),
                           sanity_reasons=tuple(reasons), duration_s=seconds, **extra)

    if probe.failure:
        return result(Status.INCONCLUSIVE, [f"could not run the probe: {probe.failure}"])
    outcome = probe.outcome_of(name)
    if outcome is None:
        return result(Status.INCONCLUSIVE, [probe.overran.get(name, "the probe did not run")])
    if probe.device_kind is None:
        return result(Status.INCONCLUSIVE, [probe.overran.get(name) or f"the probe did not start: {outcome.why()}"])
    if probe.protocol_mismatch:
        return result(Status.INCONCLUSIVE, [probe.protocol_mismatch])
    if suite.device(probe.device_kind).settings(name) is None:
        return result(Status.NOT_APPLICABLE, [f"the suite runs no {name} check on a {probe.device_kind} device"])
    results = [r for r in probe.results if r.check == name]
    skips = {str(s.get("metric")): str(s.get("reason")) for s in probe.skips if s.get("check") == name}
    errors = [e for e in probe.errors if e.get("check") == name]
    right = [r for r in results if r.sanity.passed]
    wrong = [r for r in results if not r.sanity.passed]
    facts: dict[str, Any] = {
        "device": probe.device.get("device_name"), "device_kind": probe.device_kind, **job_facts(outcome),
        "sanity": {_gpu_named(r.metric, r.gpu, probe, gpus)[0]: r.sanity.detail for r in results},
    }
    if wrong:  # kept for the record, never judged: the speed of a wrong answer says nothing
        facts["wrong_results"] = {_gpu_named(r.metric, r.gpu, probe, gpus)[0]: {
            "value": r.performance.value, "unit": r.performance.unit} for r in wrong}
    measurements = tuple(_measurement(r, probe, gpus) for r in right)
    too_big = [e for e in errors if resource_errors.is_out_of_memory(resource_errors.classify(str(e.get("error"))))]
    errors = [e for e in errors if e not in too_big]
    failures = [f"{_on(r.metric, r.gpu, probe, gpus)}: wrong result ({r.sanity.detail})" for r in wrong]
    failures += [_error_reason(e, _on(str(e.get("metric")), e.get("gpu"), probe, gpus)) for e in errors]
    fixes = _remedies(declaration, wrong, errors, probe, gpus)
    unmeasured = [f"{_error_reason(e, _on(str(e.get('metric')), e.get('gpu'), probe, gpus), advice=False)}:"
                  f" {_too_big(name, suite, probe)}" for e in too_big]
    stopped = probe.overran.get(name)
    if stopped:  # a wrong answer before it hung still fails it; else it could not be measured
        status = Status.FAIL if failures else Status.INCONCLUSIVE
        return result(status, [*failures, *unmeasured, stopped], measurements=measurements, skipped=skips,
                      facts=facts, remediation=fixes)
    if name not in probe.timings and not results and not errors and not too_big:
        ended = "timed out" if outcome.timed_out else f"ended ({outcome.why()})"
        return result(Status.INCONCLUSIVE, [f"the probe {ended} before the {name} check"], skipped=skips, facts=facts)
    if failures:
        return result(Status.FAIL, [*failures, *unmeasured], measurements=measurements, skipped=skips, facts=facts,
                      remediation=fixes)
    if unmeasured:  # the suite's sizes, not the node: nothing to judge it by
        return result(Status.INCONCLUSIVE, unmeasured, measurements=measurements, skipped=skips, facts=facts)
    if not results:
        reasons = sorted(set(skips.values())) or [f"the suite gives no {name} case for this device"]
        return result(Status.NOT_APPLICABLE, reasons, skipped=skips, facts=facts)
    return result(Status.PASS, [], measurements=measurements, skipped=skips, facts=facts)


def _too_big(name: str, suite: Suite, probe: ProbeRun) -> str:
    """What a case that ran out of memory says of the suite: its sizes ask more than this node has."""
    kind = probe.device_kind or "cpu"
    found = suite.device(kind).settings(name)
    given = found.model_dump(mode="json", exclude={"timeout_minutes"}, exclude_defaults=True) if found else {}
    shown = ", ".join(f"{k}: {json.dumps(v)}" for k, v in given.items())
    return (f"the suite's sizes ask more memory than this node can allocate (qualify.yaml {kind}.{name}"
            f"{' {' + shown + '}' if shown else ''}): lower them; this says nothing about the node")


def _error_reason(error: dict[str, Any], metric: str, *, advice: bool = True) -> str:
    """The metric, what ran out (with its advice, unless the caller knows the cause: the suite's own
    sizes) and what the probe said."""
    said = str(error.get("error", ""))
    found = resource_errors.classify(said)
    summary = (found[0].summary if advice else found[0].what) if found else ""
    return f"{metric}: {summary + ': ' if summary else ''}{said[:240]}"
