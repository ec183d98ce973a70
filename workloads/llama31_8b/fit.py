"""How many decoder blocks of the configured width a training step fits in a GPU's free memory.

    python -m workloads.llama31_8b.fit [--micro-batch 1] [--set dim=4096 ...]   # prints the count

What a step holds, as ``engine`` builds it (fp32 parameters under bf16 autocast, AdamW, activation
checkpointing): 18 bytes per parameter (fp32 weights, gradients and the two AdamW moments, and
autocast's bf16 copy of each weight, kept while the forward runs); per block its
checkpointed input, ``micro_batch * seq_len * dim`` in fp32; once, the working set of one block
recomputed and run backwards (about ``(10 * dim + 4 * ffn)`` fp32 values a token) and the logits
(bf16, their fp32 copy, its gradient and the softmax: 14 bytes a token and word); and a tenth of the
free memory left spare for the allocator and CUDA's own. An estimate from the shapes, not a
measurement: the GPU session's part runs the count it gives and says so if it does not fit.
"""

from __future__ import annotations

import sys

from workloads.common.cli import Parser, run_main
from workloads.common.errors import SettingsError
from workloads.llama31_8b.config import TrainConfig, build
from workloads.llama31_8b.model import Shape

STATE_BYTES = 18
"""fp32 weight, gradient and AdamW's two moments, and autocast's bf16 copy of the weight, per parameter."""
SPARE = 0.10
"""Share of the free memory left unused."""


def block_parameters(shape: Shape) -> int:
    kv = shape.kv_heads * shape.head_dim
    return 2 * shape.dim * shape.dim + 2 * shape.dim * kv + 3 * shape.dim * shape.ffn + 2 * shape.dim


def layers_that_fit(free_bytes: int, shape: Shape, micro_batch: int) -> int:
    """The most blocks (at most ``shape.layers``, possibly 0) whose step fits in ``free_bytes``."""
    tokens = micro_batch * shape.seq_len
    fixed = STATE_BYTES * (2 * shape.vocab * shape.dim + shape.dim)
    working = tokens * (10 * shape.dim + 4 * shape.ffn) * 4 + tokens * shape.vocab * 14
    per_block = STATE_BYTES * block_parameters(shape) + tokens * shape.dim * 4
    room = free_bytes * (1 - SPARE) - fixed - working
    return max(0, min(shape.layers, int(room // per_block)))


def _main(argv: list[str] | None) -> None:
    parser = Parser(prog="python -m workloads.llama31_8b.fit", description=__doc__.splitlines()[0])
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--free-bytes", type=int, default=None, help="default: the CUDA device's free memory")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE", help="override TrainConfig fields")
    args = parser.parse_args(argv)
    if args.micro_batch < 1:
        raise SettingsError(f"--micro-batch must be at least 1, got {args.micro_batch}")
    config: TrainConfig = build("closed", args.set)
    free = args.free_bytes
    if free is None:
        import torch

        if not torch.cuda.is_available():
            raise SettingsError("no CUDA device: give --free-bytes")
        free = torch.cuda.mem_get_info()[0]
    sys.stdout.write(f"{layers_that_fit(free, config.shape, args.micro_batch)}\n")


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: _main(argv), prefix="llama31_8b")


if __name__ == "__main__":
    sys.exit(main())
