"""Synthetic token data with learnable structure, in the C4 layout (``.bin``/``.idx`` pairs).

Each document is a walk of a first-order Markov chain over ``vocab`` tokens: the token after ``t``
is ``successor[t]`` (a permutation drawn from the seed) with probability ``1 - noise``, else any token
uniformly. A model that learns the successor map reaches a log perplexity of the chain's entropy
rate (``entropy``: 0.47 nats at 256 tokens and noise 0.05) from ln(vocab) (5.55) untrained; the
document starts, drawn uniformly, add a little above it. Deterministic for given arguments.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workloads.llama31_8b import indexed
from workloads.llama31_8b.sequences import train_prefix, validation_prefix

SHARD = 6
"""The training shard written (the reference trains on c4-train.en_6)."""


@dataclass(frozen=True, kw_only=True)
class Spec:
    vocab: int = 256
    train_documents: int = 3000
    val_documents: int = 300
    min_length: int = 16
    max_length: int = 160
    noise: float = 0.05
    seed: int = 0

    def entropy(self) -> float:
        """Entropy rate of the chain in nats per token (the lowest log perplexity there is to learn)."""
        main = 1 - self.noise + self.noise / self.vocab
        other = self.noise / self.vocab
        return -(main * math.log(main) + (self.vocab - 1) * other * math.log(other))


def documents(spec: Spec, count: int, stream: int) -> Iterator[np.ndarray]:
    generator = np.random.default_rng([spec.seed, stream])
    successor = np.random.default_rng([spec.seed]).permutation(spec.vocab)
    for _ in range(count):
        length = int(generator.integers(spec.min_length, spec.max_length + 1))
        tokens = np.empty(length, dtype=np.int64)
        tokens[0] = generator.integers(spec.vocab)
        jumps = generator.random(length) < spec.noise
        randoms = generator.integers(spec.vocab, size=length)
        for i in range(1, length):
            tokens[i] = randoms[i] if jumps[i] else successor[tokens[i - 1]]
        yield tokens


def write(folder: Path, spec: Spec) -> None:
    """The training shard and the validation pair into ``folder`` (which exists)."""
    dtype = indexed.token_dtype(spec.vocab)
    indexed.write(train_prefix(folder, SHARD), documents(spec, spec.train_documents, 1), dtype)
    indexed.write(validation_prefix(folder), documents(spec, spec.val_documents, 2), dtype)
