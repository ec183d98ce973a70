"""One rank of a 2-process gloo group on the CPU for test_distributed.py: every collective of the
kit once, the answers written to ``OUT/rank<r>.json``.

    RANK=r WORLD_SIZE=2 LOCAL_RANK=r LOCAL_WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... \\
        python two_ranks.py OUT [keep-ddp]

With ``keep-ddp`` the block still holds a DDP model when it ends (what `shutdown` warns about).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import nn

from workloads.common.distributed import all_reduce_sum, any_rank, broadcast_int, joined, wrap


def main(out: Path, keep_ddp: bool) -> None:
    with joined("cpu") as ctx:
        kept = wrap(nn.Linear(2, 2), ctx) if keep_ddp else None
        given = torch.tensor([ctx.rank + 1.0, 10.0], dtype=torch.float64)
        total = all_reduce_sum(given, ctx)
        flags = torch.zeros(3, dtype=torch.int32)
        flags[2] = int(ctx.rank == 1)
        facts = {
            "rank": ctx.rank, "world_size": ctx.world_size, "local_rank": ctx.local_rank,
            "local_world_size": ctx.local_world_size, "backend": ctx.backend, "is_main": ctx.is_main,
            "sum": total.tolist(), "given_after": given.tolist(), "same_object": total is given,
            "any_rank1_bool": any_rank(ctx.rank == 1, ctx), "any_none": any_rank(False, ctx),
            "any_rank1_tensor": any_rank(flags, ctx), "any_zeros": any_rank(torch.zeros(4), ctx),
            "broadcast": broadcast_int(100 + ctx.rank, ctx), "kept_ddp": kept is not None,
        }
    (out / f"rank{facts['rank']}.json").write_text(json.dumps(facts))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] == ["keep-ddp"])
