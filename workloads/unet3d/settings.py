"""The settings one training process runs with, once every ``auto`` is resolved on its device.

``precision.resolve`` decides precision and threads; this adds what follows from the device: the
memory format, loader workers, pinned memory, windows per evaluation batch. The result is logged
once, before run_start, as the ``resolved_settings`` MLLOG event.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workloads.unet3d import precision as P

MAX_WORKERS = 8  # the reference's loader workers per process
CUDA_EVAL_BATCH = 4


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
    channels_last: bool
    """channels_last_3d memory format for the model and its inputs."""
    compile: bool
    """torch.compile (done and warmed up before run_start)."""
    num_workers: int
    """Training loader worker processes."""
    eval_batch: int
    """Sliding windows per forward pass in evaluation."""
    why: str
    """Why the precision is what it is (one sentence)."""

    @property
    def pin_memory(self) -> bool:
        return self.device.type == "cuda"

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
            "device": self.device.type,
            "device_name": self.device_name,
            "capability": f"{self.capability[0]}.{self.capability[1]}" if self.capability else None,
            "channels_last": self.channels_last,
            "compile": self.compile,
            "num_workers": self.num_workers,
            "eval_batch": self.eval_batch,
            "why": self.why,
        }


def auto_workers(device_type: str, cpus_per_process: int) -> int:
    """Loader workers for ``auto``: on CUDA min(8, CPUs per process - 1); on a CPU 0 (the training
    process needs every core, and the crop is cheap next to a CPU step)."""
    return min(MAX_WORKERS, max(0, cpus_per_process - 1)) if device_type == "cuda" else 0


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
) -> RunSettings:
    """Every ``auto`` (None) resolved for ``device``; reads the machine (CPUs, bf16 support, GPU)."""
    cpus = P.usable_cpus() if cpus is None else cpus
    capability = P.cuda_capability(device)
    resolved = P.resolve(requested_precision, device.type, capability, P.cpu_bf16_native(), cpus, nproc, threads)
    cuda = device.type == "cuda"
    per_process = max(1, cpus // max(1, nproc))
    return RunSettings(
        device=device,
        device_name=P.device_name(device),
        capability=capability,
        requested_precision=P.normalise(requested_precision),
        precision=resolved.precision,
        threads=resolved.threads,
        nproc=nproc,
        channels_last=auto_channels_last(device.type, compile_model) if channels_last is None else channels_last,
        compile=compile_model,
        num_workers=auto_workers(device.type, per_process) if num_workers is None else num_workers,
        eval_batch=(CUDA_EVAL_BATCH if cuda else 1) if eval_batch is None else eval_batch,
        why=resolved.why,
    )
