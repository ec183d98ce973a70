"""The llama31_8b dataset command line (the workload contract's ``data.cli``).

    python -m workloads.llama31_8b.dataset synthesize OUT [--vocab 256 --train-documents 3000 ...]
    python -m workloads.llama31_8b.dataset check DIR      # file set, sizes, token counts (seconds)
    python -m workloads.llama31_8b.dataset prepare DIR --cache C   # prints DIR when it passes check
    python -m workloads.llama31_8b.dataset how-to-get

A training-ready folder holds MLCommons' preprocessed C4 as the reference names it:
``c4-train.en_6_text_document.{bin,idx}`` (the shard the reference trains on; en_0 to en_7 may be
there too) and ``c4-validation-91205-samples.en_text_document.{bin,idx}``. The real validation pair
holds 91,205 documents and 47,186,855 tokens (the reference's README); a synthetic folder
(``synthetic.json``) is checked for its own counts.

Exit codes: 0 ok, 2 bad input or data (one line on stderr naming what is wrong), 1 other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from workloads.common.atomic import staged_folder
from workloads.common.cli import Parser
from workloads.common.dataset_cli import add_check_and_prepare, add_how_to_get, say
from workloads.common.dataset_cli import main as dataset_main
from workloads.common.errors import DataError
from workloads.llama31_8b import indexed, synthetic
from workloads.llama31_8b.indexed import IndexedTokens
from workloads.llama31_8b.sequences import train_prefix, validation_prefix

READY_MARKER = ".mltrain-ready"
SYNTHETIC_FACTS = "synthetic.json"
VALIDATION_DOCUMENTS = 91_205
VALIDATION_TOKENS = 47_186_855
REQUIRED_SHARDS = (6,)

HOW_TO_GET = """\
llama31_8b trains on MLCommons' preprocessed C4 (Llama 3.1 tokenizer, Megatron .bin/.idx pairs).
Download it with MLCommons' R2 downloader into the folder you will pass as --data:
  cd DIR
  bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh) \\
    -d llama3_1_8b_preprocessed_c4_dataset \\
    https://training.mlcommons-storage.org/metadata/llama-3-1-8b-preprocessed-c4-dataset.uri
The folder must hold c4-train.en_6_text_document.{bin,idx} (the shard the reference trains on) and
c4-validation-91205-samples.en_text_document.{bin,idx} (91,205 documents, 47,186,855 tokens).
The tokenizer (not needed for training on the preprocessed data):
  bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh) \\
    -d llama3_1_8b_tokenizer https://training.mlcommons-storage.org/metadata/llama-3-1-8b-tokenizer.uri
Check it: python -m workloads.llama31_8b.dataset check DIR. Smoke runs need none of this: their
data is synthetic (python -m workloads.llama31_8b.dataset synthesize OUT).
"""


def missing_files(root: Path) -> list[str]:
    wanted = [validation_prefix(root)] + [train_prefix(root, shard) for shard in REQUIRED_SHARDS]
    return [path.name for prefix in wanted for path in indexed.paths(prefix) if not path.is_file()]


def check_ready(root: Path) -> str:
    """The fast check; the line that says it passed, else a DataError naming everything missing."""
    if not root.is_dir():
        raise DataError(f"{root}: not a folder (llama31_8b needs MLCommons' preprocessed C4; "
                        "python -m workloads.llama31_8b.dataset how-to-get)")
    missing = missing_files(root)
    if missing:
        raise DataError(f"{root}: missing {', '.join(missing)} (python -m workloads.llama31_8b.dataset how-to-get)")
    validation = IndexedTokens(validation_prefix(root))
    shards = {shard: IndexedTokens(train_prefix(root, shard)) for shard in range(8)
              if all(path.is_file() for path in indexed.paths(train_prefix(root, shard)))}
    facts_path = root / SYNTHETIC_FACTS
    if facts_path.is_file():
        facts = json.loads(facts_path.read_text())
        expected_docs, kind = facts["val_documents"], "synthetic"
        expected_tokens = facts["val_tokens"]
    else:
        expected_docs, expected_tokens, kind = VALIDATION_DOCUMENTS, VALIDATION_TOKENS, "C4"
        wrong = [f"{p.name}: {t.dtype.name} tokens, int32 expected for a 128,256-token vocabulary"
                 for p, t in ((validation_prefix(root), validation), *((train_prefix(root, s), t) for s, t in
                                                                       shards.items())) if t.dtype.itemsize < 4]
        if wrong:
            raise DataError(f"{root}: {wrong[0]}")
    if (len(validation), validation.tokens) != (expected_docs, expected_tokens):
        raise DataError(f"{validation_prefix(root)}: {len(validation)} documents and {validation.tokens} tokens, "
                        f"{expected_docs} and {expected_tokens} expected ({kind} validation set)")
    listed = ", ".join(f"en_{shard} {table.tokens:,} tokens" for shard, table in shards.items())
    return f"ok {root}: {kind}, train {listed}; validation {len(validation):,} documents, {validation.tokens:,} tokens"


def cmd_synthesize(args: argparse.Namespace) -> None:
    spec = synthetic.Spec(vocab=args.vocab, train_documents=args.train_documents, val_documents=args.val_documents,
                          min_length=args.min_length, max_length=args.max_length, noise=args.noise, seed=args.seed)
    if not (spec.vocab >= 2 and 1 <= spec.min_length <= spec.max_length and spec.train_documents >= 1
            and spec.val_documents >= 1 and 0 <= spec.noise <= 1):
        raise DataError(f"invalid synthetic dataset: {spec}")
    wanted = json.dumps(dataclasses.asdict(spec), sort_keys=True) + "\n"
    out: Path = args.out
    if (out / READY_MARKER).is_file() and (out / READY_MARKER).read_text() == wanted:
        say(f"already present: {out}")
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out}: exists and is not this synthetic dataset; choose an empty or new folder")
    with staged_folder(out) as staging:
        synthetic.write(staging, spec)
        validation = IndexedTokens(validation_prefix(staging))
        facts = {**dataclasses.asdict(spec), "val_tokens": validation.tokens, "entropy_nats": spec.entropy()}
        (staging / SYNTHETIC_FACTS).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
        (staging / READY_MARKER).write_text(wanted)
    say(f"wrote {out}: {spec.train_documents} train and {spec.val_documents} validation documents over "
        f"{spec.vocab} tokens (entropy {spec.entropy():.3f} nats per token)")


def parser() -> argparse.ArgumentParser:
    root = Parser(prog="python -m workloads.llama31_8b.dataset", description=__doc__.splitlines()[0])
    commands = root.add_subparsers(dest="command", required=True)
    defaults = synthetic.Spec()
    make = commands.add_parser("synthesize", help="write synthetic token data in the C4 layout into OUT")
    make.add_argument("out", type=Path)
    for name in ("vocab", "train_documents", "val_documents", "min_length", "max_length", "seed"):
        make.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    make.add_argument("--noise", type=float, default=defaults.noise, help="chance of a random next token")
    make.set_defaults(run=cmd_synthesize)
    add_check_and_prepare(commands, check_ready)  # the preprocessed C4 is used as downloaded
    add_how_to_get(commands, HOW_TO_GET, help="MLCommons' download commands")
    return root


def main(argv: list[str] | None = None) -> int:
    return dataset_main(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
