"""Megatron's memory-mapped indexed dataset (``.bin``/``.idx`` pairs, ``MMIDIDX``): what NeMo's
``preprocess_data_for_megatron.py --dataset-impl mmap`` writes and MLCommons ships C4 as.

``PREFIX.bin`` is every document's tokens back to back. ``PREFIX.idx``, little-endian:

=========  ===========================================================================
bytes      field
=========  ===========================================================================
9          magic ``MMIDIDX\\x00\\x00``
8          version (uint64, 1)
1          token dtype code (uint8): 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
           7 float32, 8 uint16
8          sequence count S (uint64)
8          document count D (uint64): entries of the document index
4 * S      sequence lengths in tokens (int32)
8 * S      sequence byte offsets into ``.bin`` (int64)
8 * D      document index (int64): the first sequence of each document, then S
=========  ===========================================================================

``IndexedTokens`` reads a pair through ``numpy.memmap`` (nothing is loaded before a sequence is
asked for); ``write`` makes one (the synthetic dataset; one sequence per document).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from workloads.common.errors import DataError

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}
HEADER = struct.Struct("<9sQBQQ")


def paths(prefix: Path) -> tuple[Path, Path]:
    return prefix.with_name(prefix.name + ".bin"), prefix.with_name(prefix.name + ".idx")


class IndexedTokens:
    """The sequences (documents) of one ``.bin``/``.idx`` pair, memory-mapped. Every size is checked
    against the files when opened; a file that does not agree is a DataError naming it."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        bin_path, idx_path = paths(prefix)
        for path in (bin_path, idx_path):
            if not path.is_file():
                raise DataError(f"{path}: missing")
        idx_size = idx_path.stat().st_size
        with idx_path.open("rb") as handle:
            head = handle.read(HEADER.size)
        if len(head) < HEADER.size:
            raise DataError(f"{idx_path}: {idx_size} bytes, shorter than an MMIDIDX header")
        magic, version, code, sequences, documents = HEADER.unpack(head)
        if magic != MAGIC or version != VERSION or code not in DTYPES:
            raise DataError(f"{idx_path}: not a Megatron MMIDIDX index (magic {magic!r}, version {version}, "
                            f"dtype code {code})")
        expected = HEADER.size + 4 * sequences + 8 * sequences + 8 * documents
        if idx_size != expected:
            raise DataError(f"{idx_path}: {idx_size} bytes, {expected} expected for {sequences} sequences and "
                            f"{documents} document entries (truncated or not one file)")
        self.dtype = np.dtype(DTYPES[code])
        self.lengths = np.memmap(idx_path, dtype=np.int32, mode="r", offset=HEADER.size, shape=(sequences,))
        self.pointers = np.memmap(idx_path, dtype=np.int64, mode="r", offset=HEADER.size + 4 * sequences,
                                  shape=(sequences,))
        self.document_index = np.memmap(idx_path, dtype=np.int64, mode="r",
                                        offset=HEADER.size + 12 * sequences, shape=(documents,))
        self.tokens = int(self.lengths.sum(dtype=np.int64)) if sequences else 0
        bin_size = bin_path.stat().st_size
        if bin_size != self.tokens * self.dtype.itemsize:
            raise DataError(f"{bin_path}: {bin_size} bytes, {self.tokens * self.dtype.itemsize} expected for the "
                            f"{self.tokens} {self.dtype.name} tokens its index lists (truncated download?)")
        if sequences and (self.pointers[0] != 0 or int(self.pointers[-1]) + int(self.lengths[-1])
                          * self.dtype.itemsize != bin_size):
            raise DataError(f"{idx_path}: its offsets do not cover {bin_path} from start to end")
        self.data = np.memmap(bin_path, dtype=self.dtype, mode="r") if self.tokens else np.zeros(0, self.dtype)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> np.ndarray:
        start = int(self.pointers[index]) // self.dtype.itemsize
        return self.data[start:start + int(self.lengths[index])]

    def read(self, index: int, offset: int, length: int) -> np.ndarray:
        """``length`` tokens of sequence ``index`` from token ``offset``."""
        start = int(self.pointers[index]) // self.dtype.itemsize + offset
        return self.data[start:start + length]


def token_dtype(vocab: int) -> np.dtype:
    """The dtype Megatron's preprocessing picks for a vocabulary: uint16 below 65,500 tokens, else int32."""
    return np.dtype(np.uint16 if vocab < 65_500 else np.int32)


def write(prefix: Path, documents: Iterable[np.ndarray], dtype: np.dtype) -> None:
    """Write ``PREFIX.bin`` and ``PREFIX.idx`` (one sequence per document) in ``dtype``."""
    code = next(code for code, kind in DTYPES.items() if np.dtype(kind) == dtype)
    bin_path, idx_path = paths(prefix)
    lengths: list[int] = []
    with bin_path.open("wb") as out:
        for document in documents:
            array = np.asarray(document, dtype=dtype)
            out.write(array.tobytes(order="C"))
            lengths.append(len(array))
    sizes = np.asarray(lengths, dtype=np.int32)
    pointers = np.zeros(len(sizes), dtype=np.int64)
    if len(sizes) > 1:
        pointers[1:] = np.cumsum(sizes[:-1], dtype=np.int64) * dtype.itemsize
    with idx_path.open("wb") as out:
        out.write(HEADER.pack(MAGIC, VERSION, code, len(sizes), len(sizes) + 1))
        out.write(sizes.tobytes())
        out.write(pointers.tobytes())
        out.write(np.arange(len(sizes) + 1, dtype=np.int64).tobytes())
