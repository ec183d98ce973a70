"""The kit's data parallelism (workloads/common/distributed.py): the collectives on a real 2-process
gloo group on the CPU, and the facts a single process gets without torchrun."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from workloads.common import distributed
from workloads.common.distributed import Context

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("two_ranks.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_two_ranks(out: Path, *extra: str) -> list[str]:
    """Both ranks of two_ranks.py; their stderr, once both ended well."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(out), *extra], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    return [err for _, err in outputs]


@pytest.fixture(scope="module")
def ranks_and_errors(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[str]]:
    out = tmp_path_factory.mktemp("two_ranks")
    errors = run_two_ranks(out)
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)], errors


@pytest.fixture(scope="module")
def ranks(ranks_and_errors) -> list[dict]:
    return ranks_and_errors[0]


def test_a_block_that_holds_no_ddp_model_leaves_without_a_warning(ranks_and_errors):
    assert not any(distributed.OUTLIVING_DDP in err for err in ranks_and_errors[1])


def test_a_ddp_model_alive_when_the_group_is_left_is_said_on_every_rank(tmp_path: Path):
    """DDP keeps the group alive past destroy_process_group; gloo's threads then end at the
    interpreter's exit, which aborted a rank (SIGABRT) now and then: said, not left to chance."""
    errors = run_two_ranks(tmp_path, "keep-ddp")
    assert all(distributed.OUTLIVING_DDP in err for err in errors), errors


def test_each_rank_knows_where_it_sits(ranks):
    assert [(r["rank"], r["world_size"], r["local_rank"], r["local_world_size"], r["backend"], r["is_main"])
            for r in ranks] == [(0, 2, 0, 2, "gloo", True), (1, 2, 1, 2, "gloo", False)]


def test_all_reduce_sums_over_the_ranks_and_leaves_the_argument(ranks):
    assert [r["sum"] for r in ranks] == [[3.0, 20.0], [3.0, 20.0]]
    assert [r["given_after"] for r in ranks] == [[1.0, 10.0], [2.0, 10.0]]
    assert not any(r["same_object"] for r in ranks)


def test_any_rank_is_true_everywhere_when_one_rank_says_so(ranks):
    for r in ranks:
        assert (r["any_rank1_bool"], r["any_rank1_tensor"]) == (True, True), r
        assert (r["any_none"], r["any_zeros"]) == (False, False), r


def test_broadcast_gives_rank_0s_value(ranks):
    assert [r["broadcast"] for r in ranks] == [100, 100]


def test_without_torchrun_a_single_process_touches_no_collective(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a collective in a single process")

    for name in ("init_process_group", "all_reduce", "broadcast", "barrier", "destroy_process_group"):
        monkeypatch.setattr(distributed.dist, name, forbidden)
    with distributed.joined("cpu", environ={}) as ctx:
        assert (ctx.rank, ctx.world_size, ctx.local_world_size, ctx.backend) == (0, 1, 1, None)
        given = torch.tensor([1.5])
        assert distributed.all_reduce_sum(given, ctx) is given
        assert distributed.any_rank(torch.tensor([0, 2]), ctx) and not distributed.any_rank(False, ctx)
        assert distributed.broadcast_int(7, ctx) == 7
        model = nn.Linear(2, 2)
        assert distributed.wrap(model, ctx) is model


def test_the_environment_facts_readable_before_init():
    def facts(env: dict[str, str]) -> tuple[int, int, int]:
        return distributed.env_rank(env), distributed.env_world_size(env), distributed.env_local_world_size(env)

    assert facts({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}) == (3, 8, 4)
    assert facts({}) == (0, 1, 1)
    assert distributed.env_local_world_size({"WORLD_SIZE": "2"}) == 2  # torchrun before LOCAL_WORLD_SIZE


def test_a_rank_outside_the_world_is_refused():
    with pytest.raises(ValueError, match="outside world"):
        Context(rank=2, world_size=2)
