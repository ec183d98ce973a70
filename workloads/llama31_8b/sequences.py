"""Training and validation sequences cut from the C4 ``.bin``/``.idx`` pairs, as Megatron's GPT
dataset does: documents concatenated, cut into samples of ``seq_len + 1`` tokens that overlap by one
(inputs and next-token targets), no document boundary respected.

Validation (the reference's "we do not shuffle"): documents in file order, the first
``eval_samples`` samples. Training: per epoch of the shards, documents in an order drawn from the
seed and the epoch, and the samples of that concatenation in an order drawn the same way; step ``s``
takes global samples ``s * global_batch`` onwards, each process its contiguous share. Nothing is
read before a sample is asked for (the files are memory-mapped).

Where it differs from the reference: the orders are drawn by numpy's ``default_rng((seed, epoch))``,
not by Megatron's index builder (``build_pretraining_datamodule``: its doc, sample and shuffle
indices from ``numpy.random.RandomState(seed)``), so a seed sees other sequences than the
reference's run of that seed; the documents, the sample length and the validation set are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workloads.common.errors import DataError
from workloads.llama31_8b.indexed import IndexedTokens

TRAIN_PREFIX = "c4-train.en_{}_text_document"
VALIDATION_PREFIX = "c4-validation-91205-samples.en_text_document"


def train_prefix(folder: Path, shard: int) -> Path:
    return folder / TRAIN_PREFIX.format(shard)


def validation_prefix(folder: Path) -> Path:
    return folder / VALIDATION_PREFIX


class Samples:
    """Samples of ``seq_len + 1`` tokens over documents of ``shards`` concatenated in ``order``
    (global document numbers: the shards' documents one after the other; None: file order)."""

    def __init__(self, shards: Sequence[IndexedTokens], seq_len: int, order: np.ndarray | None = None) -> None:
        self.shards, self.seq_len = list(shards), seq_len
        lengths = np.concatenate([np.asarray(s.lengths, dtype=np.int64) for s in shards])
        self.starts = np.cumsum([0] + [len(s) for s in shards])
        self.order = np.arange(len(lengths)) if order is None else order
        self.cumulative = np.concatenate([[0], np.cumsum(lengths[self.order])])
        self.count = max(0, (int(self.cumulative[-1]) - 1) // seq_len)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> np.ndarray:
        if not 0 <= index < self.count:
            raise IndexError(index)
        position = index * self.seq_len
        end = position + self.seq_len + 1
        k = int(np.searchsorted(self.cumulative, position, side="right")) - 1
        parts = []
        while position < end:
            document = int(self.order[k])
            shard = int(np.searchsorted(self.starts, document, side="right")) - 1
            take = min(end, int(self.cumulative[k + 1])) - position
            if take > 0:
                parts.append(self.shards[shard].read(document - int(self.starts[shard]),
                                                     position - int(self.cumulative[k]), take))
                position += take
            k += 1
        return np.concatenate(parts).astype(np.int64)


class TrainStream:
    """The training samples of every epoch, in the seed's order."""

    def __init__(self, shards: Sequence[IndexedTokens], seq_len: int, seed: int) -> None:
        self.shards, self.seq_len, self.seed = list(shards), seq_len, seed
        self.documents = sum(len(s) for s in shards)
        self.per_epoch = max(0, (sum(s.tokens for s in shards) - 1) // seq_len)
        if not self.per_epoch:
            raise DataError(f"the training shards hold fewer than {seq_len + 1} tokens")
        self._epoch = -1
        self._samples: Samples | None = None
        self._order: np.ndarray | None = None

    def _at(self, epoch: int) -> tuple[Samples, np.ndarray]:
        if epoch != self._epoch or self._samples is None or self._order is None:
            generator = np.random.default_rng([self.seed, epoch])
            self._samples = Samples(self.shards, self.seq_len, generator.permutation(self.documents))
            self._order = generator.permutation(len(self._samples))
            self._epoch = epoch
        return self._samples, self._order

    def __getitem__(self, index: int) -> np.ndarray:
        samples, order = self._at(index // self.per_epoch)
        return samples[int(order[index % self.per_epoch])]

    def batch(self, step: int, global_batch: int, rank: int, share: int) -> np.ndarray:
        """This process's ``share`` samples of optimizer step ``step`` (0-based): (share, seq_len + 1)."""
        first = step * global_batch + rank * share
        return np.stack([self[first + i] for i in range(share)])


def open_train(folder: Path, shards: Sequence[int]) -> list[IndexedTokens]:
    return [IndexedTokens(train_prefix(folder, shard)) for shard in shards]


def validation_batches(folder: Path, seq_len: int, eval_samples: int) -> Samples:
    """The first ``eval_samples`` validation samples, in file order; a DataError when there are fewer."""
    samples = Samples([IndexedTokens(validation_prefix(folder))], seq_len)
    if len(samples) < eval_samples:
        raise DataError(f"{validation_prefix(folder)}: {len(samples)} samples of {seq_len + 1} tokens, "
                        f"{eval_samples} needed for evaluation")
    return samples
