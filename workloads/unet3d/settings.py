"""The settings one training process runs with, once every ``auto`` is resolved on its device.

``precision.resolve`` decides precision and threads; this adds what follows from the device: the
memory format, loader workers, pinned memory, windows per evaluation batch. The result is logged
once, before run_start, as the ``resolved_settings`` MLLOG event.

Loader workers (``auto_workers``), per rank:

- on a GPU: the CPUs this process may use (affinity, cgroup quota) shared by the local ranks, less
  one for the training process (it launches the kernels and pins the batches), at least
  ``MIN_GPU_WORKERS`` and at most ``MAX_WORKERS``. The reference runs 8 workers per process
  whatever the node (its ``--num_workers`` default); NVIDIA's v4.0 H100 submissions run 4 DALI
  threads per GPU with 32 logical CPUs each. The floor: a worker crops a case it has seen in a few
  milliseconds (2.5 ms for 128^3 out of a 256x320x320 case: several times the ~60 samples/s an
  H100 trains on), but its first foreground crop of a case labels the connected components (0.4 s
  there; cached afterwards, per worker), and batches are handed over in order: with one worker
  each such stall reaches the GPU once its 2 prefetched batches are used up; two keep 4 batches in
  flight and fill their caches in half the time. One more, mostly idle, process on a 2-CPU share
  costs less than an idle GPU.
- on a CPU: none. The training process needs every core and the crop is cheap next to a CPU step.

How the step runs (``StepKnobs``, each a setting the GPU session's benchmark measures beside the
reference, and each logged): the torch.compile mode (``default``, ``reduce-overhead``: CUDA graphs,
``max-autotune-no-cudagraphs``, ``max-autotune``), cuDNN's autotuner (``auto``: on for CUDA, as the
reference's ``--cudnn_benchmark`` turns it on), the Dice+CE loss from one log-softmax pass
(``fused_loss``, ``auto``: off, the reference's two passes, until a GPU measurement says otherwise;
under torch.compile inductor fuses either), and pinned host staging of the batches (``auto``: on for
CUDA, so the copy to the device runs without blocking). None of these changes what the closed rules
fix: the model, the loss's value, the optimizer, batch and schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workloads.unet3d import precision as P

MAX_WORKERS = 8  # the reference's loader workers per process
MIN_GPU_WORKERS = 2  # on a GPU, whatever the CPUs (see the module docstring)
CUDA_EVAL_BATCH = 4
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
"""torch.compile's modes: reduce-overhead and max-autotune capture CUDA graphs."""


@dataclass(frozen=True, kw_only=True)
class StepKnobs:
    """How the training step runs, as asked (None: auto, resolved on the device by ``resolve_settings``)."""

    compile_mode: str = "default"
    """torch.compile's mode when compiling (one of ``COMPILE_MODES``)."""
    cudnn_benchmark: bool | None = None
    """cuDNN's autotuner; auto: on for CUDA."""
    fused_loss: bool | None = None
    """Dice+CE from one log-softmax pass (losses.FusedDiceCELoss); auto: off."""
    pin_memory: bool | None = None
    """Pinned host staging of the loader's batches; auto: on for CUDA."""

    def __post_init__(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile mode must be one of {', '.join(COMPILE_MODES)}, got {self.compile_mode!r}")


@dataclass(frozen=True)
class Workers:
    """How many loader workers a rank runs, and why."""

    count: int
    why: str
    """One sentence for the log."""


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Resolved runtime knobs of one process."""

    device: torch.device
    """Where the model, its inputs and the collectives' tensors live."""
    device_name: str
    """GPU name, or the CPU's model name."""
    capability: tuple[int, int] | None
    """CUDA compute capability; None on the CPU."""
    requested_precision: str
    """What the caller asked for ('auto' or a precision)."""
    precision: str
    """'fp32', 'bf16' or 'fp16'."""
    threads: int
    """torch intra-op threads."""
    nproc: int
    """Processes per node."""
    cpus: int
    """CPUs this process may use (affinity, capped by a cgroup quota), shared by the ``nproc`` processes."""
    channels_last: bool
    """channels_last_3d memory format for the model and its inputs."""
    compile: bool
    """torch.compile (done and warmed up before run_start)."""
    num_workers: int
    """Training loader worker processes."""
    workers_why: str
    """How ``num_workers`` was chosen (one sentence)."""
    eval_batch: int
    """Sliding windows per forward pass in evaluation."""
    why: str
    """Why the precision is what it is (one sentence)."""
    compile_mode: str = "default"
    """torch.compile's mode (when ``compile``)."""
    cudnn_benchmark: bool = False
    """cuDNN's autotuner on (CUDA)."""
    fused_loss: bool = False
    """Dice+CE from one log-softmax pass."""
    pin_memory: bool = False
    """The loader pins its batches; the copy to the device does not block."""

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last_3d if self.channels_last else torch.contiguous_format

    @property
    def grad_scaler(self) -> bool:
        """fp16 needs loss scaling; bf16 and fp32 do not."""
        return self.precision == "fp16"

    def log_value(self) -> dict[str, object]:
        """The value of the ``resolved_settings`` event."""
        return {
            "precision": self.precision,
            "requested_precision": self.requested_precision,
            "threads": self.threads,
            "nproc": self.nproc,
            "cpus": self.cpus,
            "device": self.device.type,
            "device_name": self.device_name,
            "capability": f"{self.capability[0]}.{self.capability[1]}" if self.capability else None,
            "channels_last": self.channels_last,
            "compile": self.compile,
            "compile_mode": self.compile_mode if self.compile else None,
            "cudnn_benchmark": self.cudnn_benchmark,
            "fused_loss": self.fused_loss,
            "pin_memory": self.pin_memory,
            "num_workers": self.num_workers,
            "workers_why": self.workers_why,
            "eval_batch": self.eval_batch,
            "why": self.why,
        }


def auto_workers(device_type: str, cpus: int, local_ranks: int) -> Workers:
    """Loader workers per rank for ``auto`` on a ``device_type`` ('cpu' or 'cuda') node where each of
    ``local_ranks`` processes may use ``cpus`` CPUs (see the module docstring)."""
    if device_type != "cuda":
        return Workers(0, "0 on a CPU: the training process needs every core")
    ranks = max(1, local_ranks)
    share = max(1, cpus // ranks)
    spare = share - 1  # one CPU for the training process itself
    count = min(MAX_WORKERS, max(MIN_GPU_WORKERS, spare))
    basis = (f"{cpus} CPUs / {ranks} local rank{'s' if ranks > 1 else ''} = {share} per rank, "
             f"less 1 for the training process = {spare}")
    if count > spare:
        return Workers(count, f"{count} on a GPU: {basis}, raised to the floor {MIN_GPU_WORKERS}")
    if count < spare:
        return Workers(count, f"{count} on a GPU: {basis}, capped at the reference's {MAX_WORKERS}")
    return Workers(count, f"{count} on a GPU: {basis}")


def asked_workers(count: int) -> Workers:
    return Workers(count, f"{count} as asked")


def auto_channels_last(device_type: str, compile_model: bool) -> bool:
    """channels_last_3d for ``auto``: on CUDA with torch.compile only. In eager mode PyTorch's
    InstanceNorm3d (and GroupNorm on CUDA) makes its input contiguous, so every norm would copy a
    channels_last activation to NCDHW and the next convolution copy it back; inductor decomposes the
    norm and keeps one layout. The GPU benchmark measures both eager layouts (ours-best, ours-best-cl)."""
    return device_type == "cuda" and compile_model


def resolve_settings(
    *,
    device: torch.device,
    requested_precision: str,
    threads: int | None,
    nproc: int,
    channels_last: bool | None,
    compile_model: bool,
    num_workers: int | None,
    eval_batch: int | None,
    cpus: int | None = None,
    knobs: StepKnobs | None = None,
) -> RunSettings:
    """Every ``auto`` (None) resolved for ``device``; reads the machine (CPUs, bf16 support, GPU)."""
    cpus = P.usable_cpus() if cpus is None else cpus
    knobs = knobs or StepKnobs()
    capability = P.cuda_capability(device)
    resolved = P.resolve(requested_precision, device.type, capability, P.cpu_bf16_native(), cpus, nproc, threads)
    cuda = device.type == "cuda"
    workers = auto_workers(device.type, cpus, nproc) if num_workers is None else asked_workers(num_workers)
    return RunSettings(
        device=device,
        device_name=P.device_name(device),
        capability=capability,
        requested_precision=P.normalise(requested_precision),
        precision=resolved.precision,
        threads=resolved.threads,
        nproc=nproc,
        cpus=cpus,
        channels_last=auto_channels_last(device.type, compile_model) if channels_last is None else channels_last,
        compile=compile_model,
        num_workers=workers.count,
        workers_why=workers.why,
        eval_batch=(CUDA_EVAL_BATCH if cuda else 1) if eval_batch is None else eval_batch,
        why=resolved.why,
        compile_mode=knobs.compile_mode,
        cudnn_benchmark=cuda if knobs.cudnn_benchmark is None else knobs.cudnn_benchmark and cuda,
        fused_loss=bool(knobs.fused_loss),
        pin_memory=cuda if knobs.pin_memory is None else knobs.pin_memory and cuda,
    )
