"""``NPROC=auto``: the number of processes per node, printed for ``run_and_time.sh`` and ``throughput.sh``.

    python -m workloads.resnet50.nproc     # the visible CUDA devices, or 1 without a GPU

``torch.cuda.device_count()`` honours CUDA_VISIBLE_DEVICES and does not create a CUDA context.
"""

from __future__ import annotations

import sys

import torch


def auto_nproc() -> int:
    """One process per visible CUDA device; 1 on a CPU-only host."""
    return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def main() -> int:
    sys.stdout.write(f"{auto_nproc()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
