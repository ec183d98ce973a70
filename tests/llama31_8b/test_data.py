"""The C4 reader against a .bin/.idx pair written here from the format's layout (not by the
workload's writer), the samples cut from it, and the dataset command line's one-line refusals."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workloads.common.errors import DataError
from workloads.llama31_8b import dataset
from workloads.llama31_8b.indexed import IndexedTokens
from workloads.llama31_8b.sequences import VALIDATION_PREFIX, Samples, TrainStream, train_prefix

PROJECT = Path(__file__).resolve().parents[2]
DOCUMENTS = [[5, 6, 7], [128000, 9], [], [1, 2, 3, 4, 5, 128255]]


def write_megatron_pair(prefix: Path, documents: list[list[int]]) -> None:
    """Megatron's MMIDIDX layout written by hand: magic, version 1, dtype code 4 (int32), the
    sequence and document counts, int32 lengths, int64 byte offsets, the int64 document index."""
    body = b"".join(struct.pack(f"<{len(d)}i", *d) for d in documents)
    prefix.with_name(prefix.name + ".bin").write_bytes(body)
    lengths = [len(d) for d in documents]
    offsets = [4 * sum(lengths[:i]) for i in range(len(lengths))]
    index = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4)
    index += struct.pack("<QQ", len(documents), len(documents) + 1)
    index += struct.pack(f"<{len(lengths)}i", *lengths) + struct.pack(f"<{len(offsets)}q", *offsets)
    index += struct.pack(f"<{len(documents) + 1}q", *range(len(documents) + 1))
    prefix.with_name(prefix.name + ".idx").write_bytes(index)


def test_the_reader_reads_a_pair_written_from_the_format_spec(tmp_path: Path):
    prefix = tmp_path / "c4-train.en_6_text_document"
    write_megatron_pair(prefix, DOCUMENTS)
    tokens = IndexedTokens(prefix)
    assert len(tokens) == 4 and tokens.tokens == 11 and tokens.dtype == np.int32
    assert [tokens[i].tolist() for i in range(4)] == DOCUMENTS
    assert tokens.read(3, 2, 3).tolist() == [3, 4, 5]
    # samples of seq_len + 1 tokens over the concatenation, overlapping by one, across documents
    samples = Samples([tokens], seq_len=4)
    flat = [t for d in DOCUMENTS for t in d]
    assert len(samples) == 2 and [samples[i].tolist() for i in range(2)] == [flat[0:5], flat[4:9]]
    order = np.array([3, 2, 1, 0])
    shuffled = Samples([tokens], seq_len=4, order=order)
    assert shuffled[0].tolist() == [t for d in order for t in DOCUMENTS[d]][0:5]


def test_training_batches_split_the_global_batch_between_processes(tmp_path: Path):
    prefix = train_prefix(tmp_path, 6)
    write_megatron_pair(prefix, [list(range(i * 10, i * 10 + 10)) for i in range(20)])
    stream = TrainStream([IndexedTokens(prefix)], seq_len=7, seed=3)
    whole = stream.batch(5, global_batch=4, rank=0, share=4)
    halves = [stream.batch(5, global_batch=4, rank=r, share=2) for r in range(2)]
    assert np.array_equal(np.concatenate(halves), whole) and whole.shape == (4, 8)
    assert not np.array_equal(TrainStream([IndexedTokens(prefix)], 7, seed=4).batch(5, 4, 0, 4), whole)


def test_a_truncated_bin_and_a_foreign_idx_are_one_line_data_errors(tmp_path: Path):
    prefix = tmp_path / "x"
    write_megatron_pair(prefix, DOCUMENTS)
    bin_path = prefix.with_name("x.bin")
    bin_path.write_bytes(bin_path.read_bytes()[:-4])
    with pytest.raises(DataError, match=r"x\.bin: 40 bytes, 44 expected .*truncated"):
        IndexedTokens(prefix)
    prefix.with_name("x.idx").write_bytes(b"TNTIDX\x00\x00" + bytes(40))
    with pytest.raises(DataError, match="not a Megatron MMIDIDX index"):
        IndexedTokens(prefix)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads.llama31_8b.dataset", *args], cwd=PROJECT,
                          capture_output=True, text=True, timeout=60)


def test_prepare_names_every_missing_file_in_one_line_and_accepts_a_complete_folder(tmp_path: Path,
                                                                                   tiny_data: Path):
    empty = tmp_path / "download"
    empty.mkdir()
    write_megatron_pair(empty / VALIDATION_PREFIX, DOCUMENTS)
    result = run_cli("prepare", str(empty), "--cache", str(tmp_path / "cache"))
    assert result.returncode == 2 and result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert "missing c4-train.en_6_text_document.bin, c4-train.en_6_text_document.idx" in result.stderr
    write_megatron_pair(train_prefix(empty, 6), DOCUMENTS)
    result = run_cli("check", str(empty))  # real C4 must have the reference's validation counts
    assert result.returncode == 2 and "4 documents and 11 tokens, 91205 and 47186855 expected" in result.stderr
    result = run_cli("prepare", str(tiny_data), "--cache", str(tmp_path / "cache"))
    assert result.returncode == 0 and result.stdout == f"{tiny_data}\n", result.stderr
    how = run_cli("how-to-get")
    assert how.returncode == 0 and how.stdout == dataset.HOW_TO_GET
    assert "mlc-r2-downloader.sh" in how.stdout and "llama-3-1-8b-preprocessed-c4-dataset.uri" in how.stdout
