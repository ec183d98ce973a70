"""Out-of-memory and other resource errors, recognised in the text a run printed.

`classify(text)` is pure: it returns one `ResourceError` per kind found, with the first line
that showed it, so that a failed seed can say "CUDA out of memory" instead of "exit code 1".
Patterns are the messages the libraries print themselves (PyTorch, the CUDA runtime, NCCL,
the Linux OOM killer, the C library's errno strings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class ResourceKind(str, Enum):
    """What ran out or broke."""

    CUDA_OOM = "cuda_out_of_memory"
    HOST_OOM = "host_out_of_memory"
    SHARED_MEMORY = "shared_memory_exhausted"
    NCCL = "nccl_error"
    CUDA_ERROR = "cuda_error"
    DISK_FULL = "disk_full"
    TOO_MANY_FILES = "too_many_open_files"
    GPU_LOST = "gpu_lost"
    DATALOADER_KILLED = "dataloader_worker_killed"


@dataclass(frozen=True, kw_only=True)
class ResourceError:
    """One kind of resource error seen in a run's output."""

    kind: ResourceKind
    """What ran out or broke."""
    summary: str
    """One line a person can act on."""
    line: str
    """The first output line that showed it (stripped, at most 300 characters)."""
    line_number: int
    """1-based line number of ``line`` in the text."""
    count: int
    """How many lines showed this kind."""

    def __post_init__(self) -> None:
        if self.line_number < 1 or self.count < 1:
            raise ValueError("line_number and count start at 1")

    @property
    def what(self) -> str:
        """What ran out or broke, without the advice (the summary's head, "GPU out of memory"): for a
        message whose cause, and so its advice, is known otherwise."""
        return self.summary.partition(": ")[0]


@dataclass(frozen=True)
class _Rule:
    kind: ResourceKind
    pattern: re.Pattern[str]
    summary: str


def _rule(kind: ResourceKind, pattern: str, summary: str) -> _Rule:
    return _Rule(kind, re.compile(pattern, re.IGNORECASE), summary)


# Order matters only for the report; each rule is tested on every line.
RULES: tuple[_Rule, ...] = (
    _rule(ResourceKind.CUDA_OOM,
          r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
          r"|OutOfMemoryError|HIP out of memory|RESOURCE_EXHAUSTED: Out of memory",
          "GPU out of memory: lower the per-GPU batch size or the model scale, or enable AMP"),
    _rule(ResourceKind.HOST_OOM,
          r"Out of memory: Killed process|oom-kill|oom_reaper|Killed process \d+|MemoryError"
          r"|std::bad_alloc|DefaultCPUAllocator: (?:can't|not enough memory)",
          "host out of memory: fewer data-loader workers, a smaller batch, or more RAM"),
    _rule(ResourceKind.SHARED_MEMORY,
          r"No space left on device.*?/dev/shm|unable to (?:open|write to) shared memory|shm_open|"
          r"insufficient shared memory|bus error",
          "shared memory exhausted: run the container with a larger --shm-size (or --ipc=host)"),
    _rule(ResourceKind.NCCL,
          r"NCCL (?:error|WARN)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError"
          r"|Watchdog caught collective operation timeout|ProcessGroupNCCL.*timeout",
          "NCCL communication failed: check NVLink/network health, NCCL_DEBUG=INFO, and peer processes"),
    _rule(ResourceKind.GPU_LOST,
          r"fallen off the bus|NVRM: Xid|\bXid \d+|GPU is lost|uncorrectable ECC",
          "GPU fault (Xid / ECC / fell off the bus): check `nvidia-smi -q` and the kernel log; drain the node"),
    _rule(ResourceKind.CUDA_ERROR,
          r"CUDA error: (?!out of memory)|CUDA driver version is insufficient|no CUDA-capable device"
          r"|cudaErrorNoDevice|CUDA initialization: ",
          "CUDA runtime error: check the driver, CUDA_VISIBLE_DEVICES and the container's GPU runtime"),
    _rule(ResourceKind.DISK_FULL,
          r"No space left on device|ENOSPC|Disk quota exceeded",
          "disk full: free space in the results or checkpoint folder"),
    _rule(ResourceKind.TOO_MANY_FILES,
          r"Too many open files|EMFILE",
          "too many open files: raise `ulimit -n` or lower the data-loader workers"),
    _rule(ResourceKind.DATALOADER_KILLED,
          r"DataLoader worker \(pid[^)]*\) is killed by signal|DataLoader worker .* exited unexpectedly",
          "a data-loader worker was killed (usually host or shared-memory OOM): fewer workers or more memory"),
)

_MAX_LINE = 300


def classify(text: str) -> list[ResourceError]:
    """Every kind of resource error in ``text``, in the order of its first appearance."""
    first: dict[ResourceKind, tuple[int, str, str]] = {}
    counts: dict[ResourceKind, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(":::MLLOG"):
            continue
        for rule in _matching_rules(line):
            counts[rule.kind] = counts.get(rule.kind, 0) + 1
            first.setdefault(rule.kind, (number, line[:_MAX_LINE], rule.summary))
    ordered = sorted(first.items(), key=lambda item: item[1][0])
    return [
        ResourceError(kind=kind, summary=summary, line=line, line_number=number, count=counts[kind])
        for kind, (number, line, summary) in ordered
    ]


def _matching_rules(line: str) -> list[_Rule]:
    matched = [rule for rule in RULES if rule.pattern.search(line)]
    kinds = {rule.kind for rule in matched}
    # A more specific kind hides a generic one seen on the same line.
    if kinds & {ResourceKind.SHARED_MEMORY} and ResourceKind.DISK_FULL in kinds:
        matched = [r for r in matched if r.kind is not ResourceKind.DISK_FULL]
    if ResourceKind.CUDA_OOM in kinds:
        matched = [r for r in matched if r.kind not in (ResourceKind.CUDA_ERROR, ResourceKind.HOST_OOM)]
    return matched


def is_out_of_memory(errors: list[ResourceError]) -> bool:
    """True when the run failed for memory (device, host or shared), for RunStatus.OOM."""
    memory = {ResourceKind.CUDA_OOM, ResourceKind.HOST_OOM, ResourceKind.SHARED_MEMORY}
    return any(error.kind in memory for error in errors)


GPU_FAULTS = frozenset({ResourceKind.GPU_LOST, ResourceKind.CUDA_ERROR, ResourceKind.NCCL})
"""The errors that are the GPU's or its fabric's (an Xid, an ECC error, a lost device, a CUDA or NCCL
failure), not the program's: a qualification FAILs a node for these alone."""


def gpu_faults(errors: list[ResourceError]) -> list[ResourceError]:
    """The errors among ``errors`` that are the GPU's (`GPU_FAULTS`)."""
    return [error for error in errors if error.kind in GPU_FAULTS]
