"""The one reader bounds memory, not only bytes (`orchestrator.config.reading`): nothing is allocated
before it is read (a buffer of the bound itself, 8 GiB for an accuracy log, was a MemoryError under a
4 GB limit), each kind of file has its own bound (a 249 MB manifest grew `list` to 11.6 GB), and an
accuracy log is read one response at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from orchestrator.config import reading
from orchestrator.config.reading import RECORD_BYTES, JsonProblem, _array_items
from orchestrator.inference.compliance import check_test01_accuracy

PROJECT = Path(__file__).resolve().parents[2]


def test_a_small_file_read_under_a_large_bound_allocates_only_what_it_holds(tmp_path: Path):
    path = tmp_path / "small.json"
    path.write_text('{"a": 1}')
    script = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from orchestrator.config.reading import read_json
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, resource.RLIM_INFINITY))
        print(read_json(Path({str(path)!r}), max_bytes=8 * 2**30))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PROJECT, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "{'a': 1}", done.stderr[-600:]


def test_a_manifest_beyond_the_record_bound_is_named_and_the_others_listed(cli, tmp_path: Path):
    results = tmp_path / "r"
    ids = [json.loads(cli("run", "fakebench", "--seeds", "1-3", "--results", str(results), "--json").out)["run_id"]
           for _ in range(2)]
    path = results / ids[0] / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["system"]["padding"] = "x" * (RECORD_BYTES + 1)  # a valid manifest, only too large
    path.write_text(json.dumps(manifest))
    r = cli("list", "--results", str(results), "--json")
    assert r.code == 2 and [row["run_id"] for row in json.loads(r.out)] == [ids[1]], (r.code, r.err)
    assert f"{path}: unreadable" in r.err and f"larger than the {RECORD_BYTES:,} read" in r.err, r.err


def _log(path: Path, responses: dict[int, np.ndarray]) -> Path:
    path.write_text(json.dumps([{"seq_id": n, "qsl_idx": i, "data": a.tobytes().hex().upper()}
                                for n, (i, a) in enumerate(responses.items())]))
    return path


def test_an_accuracy_log_is_checked_one_response_at_a_time(tmp_path: Path):
    """Eight responses of 4 MB of hex each: the check holds a few of them at most, never the 32 MB log."""
    big = {i: np.full(500_000, i, np.float32) for i in range(8)}
    accuracy = _log(tmp_path / "accuracy.json", big)
    test = _log(tmp_path / "test.json", big)
    size = accuracy.stat().st_size
    tracemalloc.start()
    try:
        verdict = check_test01_accuracy(accuracy, test, "float32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert verdict.passed and "num_perf_log_qsl_idx_match = 8" in verdict.report
    assert peak < size, f"{peak:,} bytes held to check a log of {size:,}"


def _chunks(data: bytes, n: int) -> list[bytes]:
    return [data[i:i + n] for i in range(0, len(data), n)]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_an_array_read_in_steps_is_the_array_whatever_the_steps(chunk: int):
    doc = [12345, 1.5e10, 2.5e-7, -3, "é€漢", {"a": [1, {"b": None}]}, True, None, "x" * 100, []]
    for text in (json.dumps(doc), json.dumps(doc, indent=2), json.dumps(doc).replace(" ", "")):
        assert list(_array_items(_chunks(text.encode(), chunk), 10_000, 64)) == doc


@pytest.mark.parametrize(("text", "said"), [
    ("{}", "an array was expected"), ("[1,]", "not JSON"), ("[1 2]", "',' or ']' expected"),
    ("[1]x", "extra data after the array"), ('["abc', "Unterminated string"), ("[1.]", "',' or ']' expected"),
    ("[" + "[" * 100_000 + "]" * 100_000 + "]", "nested deeper than 64 levels"),
    (json.dumps(["x" * 1000]), "an item of more than 100 bytes"),
])
def test_an_array_read_in_steps_refuses_what_is_not_one_within_bounds(text: str, said: str):
    with pytest.raises(JsonProblem, match=said):
        list(_array_items(_chunks(text.encode(), 7), 100 if "x" * 1000 in text else 10**6, 64))


def test_a_file_is_read_whole_whatever_its_size_said_and_however_its_reads_come(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """`read_regular` trusts no size: a file whose size says 0 (a /proc file), reads that return a few
    bytes at a time (a network file system), a file that grew since it was measured, all read to their
    end; and within the bound, whatever they said."""
    assert reading.read_regular("/proc/self/cmdline", max_bytes=RECORD_BYTES) == Path("/proc/self/cmdline").read_bytes()
    path = tmp_path / "rows.json"
    path.write_bytes(b"x" * 1000)
    real_read, real_fstat = os.read, os.fstat
    monkeypatch.setattr(reading.os, "read", lambda fd, n: real_read(fd, min(n, 7)))
    assert reading.read_regular(path, max_bytes=1000) == b"x" * 1000
    monkeypatch.setattr(reading.os, "read", real_read)
    monkeypatch.setattr(reading.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 10, *real_fstat(fd)[7:])))
    assert reading.read_regular(path, max_bytes=1000) == b"x" * 1000  # it "grew" from 10 bytes while read
    with pytest.raises(reading.UnreadableFile, match="larger than the 999 bytes read"):
        reading.read_regular(path, max_bytes=999)
