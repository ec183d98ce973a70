"""Resource errors recognised in run output, on messages as the libraries print them."""

from __future__ import annotations

import pytest

from orchestrator.runners.resource_errors import ResourceKind, classify, is_out_of_memory

CASES = [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.59 GiB total capacity)",
     ResourceKind.CUDA_OOM),
    ("RuntimeError: CUDA error: out of memory", ResourceKind.CUDA_OOM),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", ResourceKind.CUDA_OOM),
    ("[12345.678] Out of memory: Killed process 4242 (python) total-vm:123kB, anon-rss:99kB", ResourceKind.HOST_OOM),
    ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes.",
     ResourceKind.HOST_OOM),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     ResourceKind.SHARED_MEMORY),
    ("RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed.", ResourceKind.DATALOADER_KILLED),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error",
     ResourceKind.NCCL),
    ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE)",
     ResourceKind.NCCL),
    ("OSError: [Errno 28] No space left on device: '/results/ckpt.pt'", ResourceKind.DISK_FULL),
    ("OSError: [Errno 24] Too many open files", ResourceKind.TOO_MANY_FILES),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", ResourceKind.CUDA_ERROR),
    ("RuntimeError: Found no NVIDIA driver on your system. no CUDA-capable device is detected",
     ResourceKind.CUDA_ERROR),
    ("NVRM: Xid (PCI:0000:07:00): 79, pid=1234, GPU has fallen off the bus.", ResourceKind.GPU_LOST),
]


@pytest.mark.parametrize(("line", "kind"), CASES)
def test_each_message_is_classified(line: str, kind: ResourceKind) -> None:
    found = classify(f"epoch 3\n{line}\n")
    assert [e.kind for e in found] == [kind]
    assert found[0].line_number == 2 and found[0].line == line.strip() and found[0].count == 1
    assert found[0].summary


def test_ordinary_output_has_no_resource_error() -> None:
    text = "\n".join([
        ':::MLLOG {"key": "eval_accuracy", "value": 0.91, "metadata": {"note": "out of memory"}}',
        "epoch 1 loss 0.52 (memory used 3.1 GiB)",
        "Traceback (most recent call last):",
        "ValueError: bad shape",
        "oxide layer",
    ])
    assert classify(text) == []


def test_several_kinds_are_reported_in_order_and_counted() -> None:
    text = "\n".join([
        "OSError: [Errno 28] No space left on device",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 40.00 MiB",
    ])
    found = classify(text)
    assert [e.kind for e in found] == [ResourceKind.DISK_FULL, ResourceKind.CUDA_OOM]
    assert found[1].count == 2 and found[1].line_number == 2
    assert is_out_of_memory(found) and not is_out_of_memory(found[:1])


def test_long_lines_are_cut() -> None:
    found = classify("CUDA out of memory " + "x" * 1000)
    assert len(found[0].line) == 300
