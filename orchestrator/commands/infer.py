"""``mltrain infer MODEL``: one MLPerf Inference model and scenario through the real LoadGen."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

from orchestrator.commands.common import (
    JSON_OPTION,
    RESULTS_OPTION,
    RUNNERS_SAID,
    ProfileName,
    RunnerName,
    open_store,
    output,
    registry,
)

if TYPE_CHECKING:
    from orchestrator.inference.trained import TrainedModel


class Scenario(str, Enum):
    SingleStream = "SingleStream"
    MultiStream = "MultiStream"
    Server = "Server"
    Offline = "Offline"


class Backend(str, Enum):
    onnxruntime = "onnxruntime"
    torch = "torch"


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"
    tensorrt = "tensorrt"


class InferCommand(TyperCommand):
    """`infer`, whose help ends with the models the harnesses declare, read as the help is shown."""

    @property
    def epilog(self) -> str:
        return declared_models()

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        """Click sets it as it makes the command; the declarations say it."""


def declared_models() -> str:
    """The models each harness's inference.yaml declares, in its order: the line `infer --help` ends with."""
    from orchestrator.errors import ConfigError, UsageError
    from orchestrator.inference.declaration import all_models

    try:
        models = all_models(registry().roots)
    except (ConfigError, UsageError) as exc:
        return f"Models: none readable ({exc})"
    return f"Models: {', '.join(models) or 'none'} (each harness's inference.yaml)."


def register(app: typer.Typer) -> None:
    app.command("infer", cls=InferCommand, short_help="Run an inference model under LoadGen in one scenario.")(infer)


def infer(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Model: one a harness's inference.yaml declares (listed below)."),
    scenario: Scenario = typer.Option(Scenario.Offline, "--scenario", help="LoadGen scenario."),
    backend: Backend = typer.Option(Backend.onnxruntime, "--backend",
                                    help="onnxruntime (an .onnx file) or torch (.pt2)."),
    device: Device = typer.Option(Device.cpu, "--device",
                                  help="cpu, cuda, or tensorrt (ONNX Runtime's TensorRT execution provider)."),
    accuracy: bool = typer.Option(False, "--accuracy", help="The performance test, then the accuracy test (always "
                                  "with --profile mlperf)."),
    accuracy_only: bool = typer.Option(False, "--accuracy-only", help="The accuracy test alone (what the "
                                       "reference's --accuracy runs)."),
    count: int = typer.Option(None, "--count", min=1, metavar="N",
        help="Use the first N samples; N queries per test (not MLPerf)."),
    time_s: float = typer.Option(None, "--time", min=0.001, metavar="SECONDS",
        help="Test duration in seconds (not MLPerf)."),
    target_qps: str = typer.Option(None, "--target-qps", help="user.conf target_qps (Offline, Server): N or auto."),
    target_latency: str = typer.Option(None, "--target-latency-ms",
                                       help="user.conf target_latency (SingleStream, MultiStream): N or auto."),
    model_file: str = typer.Option(None, "--model", help="The model file (checked before anything runs), or a "
                                   "training run whose trained model its workload exports as MODEL."),
    model_seed: int = typer.Option(None, "--model-seed", min=0, metavar="SEED",
                                   help="With --model RUN: the seed whose model (default: the first that converged)."),
    data: Path = typer.Option(None, "--data", help="The dataset folder, in the model's layout."),
    profile: ProfileName = typer.Option(ProfileName.qualify, "--profile", help="mlperf, qualify or smoke."),
    compliance: bool = typer.Option(False, "--compliance", help="Then MLPerf's compliance tests the model needs "
                                    "(TEST01, TEST04), verified by MLCommons' rules (implies --accuracy)."),
    search: bool = typer.Option(False, "--search",
                                help="Server: find the highest target QPS that passes (bracket, then bisect)."),
    trace: bool = typer.Option(False, "--trace", help="Record the backend's per-operator profile and LoadGen's trace."),
    max_batch: int = typer.Option(None, "--max-batch", min=1, metavar="N", help="Samples per backend call."),
    threads: int = typer.Option(0, "--threads", min=0, metavar="N",
        help="Intra-op threads per call (0: the harness chooses)."),
    label: str = typer.Option(None, "--label", help="Setup name for compare and report."),
    trust_model: bool = typer.Option(False, "--trust-model",
                                     help="--backend torch: load this .pt2, which runs code its author chose as it"
                                     " loads (only a file you made)."),
    runner: RunnerName = typer.Option(RunnerName.local, "--runner", help=f"Where the harness runs: {RUNNERS_SAID}."),
    gpus: str = typer.Option(None, "--gpus", help="GPUs the harness gets (all, N, 0,1 or none)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run MODEL in one LoadGen scenario: LoadGen's logs in the MLPerf Inference layout, read into a
    record (metric, latencies, VALID/INVALID with LoadGen's reasons, accuracy, load and total time)."""
    from orchestrator.commands.common import results_dir
    from orchestrator.errors import EXIT_INVALID_RESULT
    from orchestrator.inference.plan import InferenceOptions, plan_inference
    from orchestrator.inference.session import run_inference
    from orchestrator.insight import sysinfo
    from orchestrator.render.inference import result_lines, succeeded
    from orchestrator.results.store import new_run_id
    from orchestrator.runners.select import RunnerOptions, make_runner

    out = output(ctx)
    root = results_dir(results)
    trained = trained_model(model_file, model_seed, results)
    options = InferenceOptions(model=model, scenario=scenario.value, profile=profile.value, backend=backend.value,
                               device=device.value, accuracy=accuracy, accuracy_only=accuracy_only,
                               compliance=compliance, count=count,
                               time_s=time_s,
                               target_qps=target_qps, target_latency_ms=target_latency,
                               model_file=None if trained or model_file is None else Path(model_file),
                               data=data, trace=trace, search=search, max_batch=max_batch, threads=threads,
                               label=label, trust_model=trust_model)
    plan = plan_inference(options, registry().roots, trained)
    chosen = make_runner(RunnerOptions(name=runner.value, gpus=gpus), out.status)
    record = run_inference(plan, chosen, results_root=root, run_id=new_run_id(model, profile.value),
                           command=tuple(sys.argv), system=sysinfo.capture, status=out.status, on_line=out.detail)
    if as_json:
        out.json(record.to_json())
    else:
        out.lines(result_lines(record, root / record.run_id))
    if not succeeded(record):
        raise typer.Exit(EXIT_INVALID_RESULT)


def trained_model(text: str | None, seed: int | None, results: Path | None) -> TrainedModel | None:
    """The training run ``--model`` names, when it names one (no such file, a run's id): its trained model."""
    from orchestrator.errors import UsageError
    from orchestrator.inference.trained import find_trained, looks_like_run

    if text is None or Path(text).exists() or not looks_like_run(text):
        if seed is not None:
            raise UsageError("--model-seed chooses a seed of a training run: give --model RUN")
        return None
    store = open_store(results, write=False)
    try:
        return find_trained(store, registry(), text, seed)
    except UsageError as exc:
        if f"no run {text!r}" in str(exc):
            raise UsageError(f"--model {text}: no such file, nor a run in {store.root}") from None
        raise
