"""Case naming and the train/eval split of a preprocessed unet3d dataset.

A case id is the KiTS19 folder name, ``case_XXXXX``; its preprocessed files are
``<id>_x.npy`` (image) and ``<id>_y.npy`` (label). Only ids below 210 take part (KiTS19
cases 210+ have no public labels). The split comes from ``split.json`` in the data folder when
present (``{"train": [ids], "eval": [ids]}``), else from the reference list of 42 evaluation
cases (``evaluation_cases.txt`` beside this module): every present case not in it trains.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workloads.common.atomic import write_bytes
from workloads.common.errors import DataError

MAX_CASE_ID = 210  # KiTS19 ids >= 210 are ignored (no public labels)
REFERENCE_EVAL_SHARE = 42 / 210  # the reference evaluates 42 of 210 cases
SPLIT_FILE = "split.json"
REFERENCE_EVAL_FILE = Path(__file__).with_name("evaluation_cases.txt")

_CASE_RE = re.compile(r"^case_(\d{5})$")
_IMAGE_SUFFIX = "_x.npy"
_LABEL_SUFFIX = "_y.npy"


def case_name(index: int) -> str:
    """``case_00042`` for 42."""
    return f"case_{index:05d}"


def case_index(name: str) -> int | None:
    """42 for ``case_00042``; None when ``name`` is not a case id."""
    match = _CASE_RE.match(name)
    return int(match.group(1)) if match else None


def image_file(case: str) -> str:
    return f"{case}{_IMAGE_SUFFIX}"


def label_file(case: str) -> str:
    return f"{case}{_LABEL_SUFFIX}"


def preprocessed_cases(data_dir: Path) -> list[str]:
    """Ids (< 210) that have an image file in ``data_dir``, sorted."""
    cases = []
    for path in data_dir.glob(f"case_*{_IMAGE_SUFFIX}"):
        case = path.name[: -len(_IMAGE_SUFFIX)]
        index = case_index(case)
        if index is not None and index < MAX_CASE_ID:
            cases.append(case)
    return sorted(cases)


def reference_eval_cases() -> list[str]:
    """The 42 evaluation case ids of the MLPerf reference."""
    return [case_name(int(token)) for token in REFERENCE_EVAL_FILE.read_text().split()]


@dataclass(frozen=True)
class Listing:
    """What one directory listing of a dataset folder shows: names, no file contents."""

    images: frozenset[str]
    """Case ids (< 210) with an image file."""
    labels: frozenset[str]
    """Case ids (< 210) with a label file."""
    has_split_file: bool
    """Whether ``split.json`` is there."""

    def missing_files(self, cases: Iterable[str]) -> list[str]:
        """File names that ``cases`` need and the listing lacks."""
        needed = [(image_file(c), c in self.images) for c in cases] + [(label_file(c), c in self.labels) for c in cases]
        return [name for name, present in needed if not present]


def list_dataset(data_dir: Path) -> Listing:
    """One listing of ``data_dir`` (no file is opened: safe before run_start); DataError when it holds
    no case image."""
    try:
        names = os.listdir(data_dir)
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(f"{data_dir}: no such dataset folder") from None
    except PermissionError:
        raise DataError(f"{data_dir}: not readable") from None

    def cases(suffix: str) -> frozenset[str]:
        ids = (name[: -len(suffix)] for name in names if name.endswith(suffix))
        return frozenset(c for c in ids if (index := case_index(c)) is not None and index < MAX_CASE_ID)

    listing = Listing(images=cases(_IMAGE_SUFFIX), labels=cases(_LABEL_SUFFIX), has_split_file=SPLIT_FILE in names)
    if not listing.images:
        raise DataError(f"{data_dir}: no case_XXXXX_x.npy files (not a preprocessed unet3d dataset)")
    return listing


def load_split(data_dir: Path, listing: Listing | None = None) -> tuple[list[str], list[str]]:
    """(train ids, eval ids) of the dataset in ``data_dir`` (reads ``split.json`` when the listing has
    one: call it after run_start); DataError when inconsistent or a case lacks a file."""
    listing = list_dataset(data_dir) if listing is None else listing
    if listing.has_split_file:
        train, evaluation = _read_split_file(data_dir / SPLIT_FILE)
    else:
        eval_ids = set(reference_eval_cases())
        present = sorted(listing.images)
        train = [case for case in present if case not in eval_ids]
        evaluation = [case for case in present if case in eval_ids]
    missing = listing.missing_files([*train, *evaluation])
    if missing:
        raise DataError(f"{data_dir}: {missing[0]} is missing ({len(missing)} file(s) of the split in all)")
    return train, evaluation


def _read_split_file(path: Path) -> tuple[list[str], list[str]]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: unreadable split file ({err})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected an object with 'train' and 'eval' lists")
    lists = {}
    for key in ("train", "eval"):
        value = raw.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise DataError(f"{path}: '{key}' must be a list of case ids like 'case_00000'")
        bad = [item for item in value if case_index(item) is None]
        if bad:
            raise DataError(f"{path}: '{key}' holds {bad[0]!r}, not a case id like 'case_00000'")
        lists[key] = value
    both = sorted(set(lists["train"]) & set(lists["eval"]))
    if both:
        raise DataError(f"{path}: {both[0]} is in both 'train' and 'eval'")
    return list(lists["train"]), list(lists["eval"])


def choose_eval_cases(cases: Sequence[str], eval_count: int | None = None) -> list[str]:
    """Evaluation cases of a synthetic set: the reference's share (42/210) unless ``eval_count``.

    When the count matches the reference ids present (all 210 cases: the real 168/42 split), those
    are used; otherwise cases evenly spread over the sorted list.
    """
    ordered = sorted(cases)
    if eval_count is None:
        eval_count = max(1, round(len(ordered) * REFERENCE_EVAL_SHARE)) if len(ordered) > 1 else 0
    if not 0 < eval_count < len(ordered):
        raise DataError(
            f"--eval-cases {eval_count}: must be at least 1 and leave a training case (of {len(ordered)})"
        )
    reference = [case for case in reference_eval_cases() if case in set(ordered)]
    if len(reference) == eval_count:
        return reference
    step = len(ordered) / eval_count
    return [ordered[int(step * k + step / 2)] for k in range(eval_count)]


def write_split(data_dir: Path, train: Iterable[str], evaluation: Iterable[str]) -> None:
    """Write ``split.json`` atomically."""
    text = json.dumps({"train": sorted(train), "eval": sorted(evaluation)}, indent=2) + "\n"
    write_bytes(data_dir / SPLIT_FILE, text.encode())

