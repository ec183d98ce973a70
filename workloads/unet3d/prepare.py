"""The contract's ``prepare``: the training-ready folder for the folder a user gave.

    prepare SRC --cache DIR [--min-shape N] [--workers N]

- SRC is training ready (``check`` passes): SRC itself, untouched.
- SRC is a raw KiTS19 layout (``case_XXXXX/imaging.nii.gz`` ...): preprocessed once into
  ``DIR/kits19-<key>/``, where the key is a hash of the preprocessing version and parameters and
  of every raw file's md5. The same raw data gives the same folder, found again by a later call
  (which then reads only sizes and mtimes: ``DIR/raw-index.json`` remembers the md5s); changed
  raw data or a new preprocessing version gives a new one. Preprocessing runs in parallel over
  cases and resumes where it stopped (``DIR/.kits19-<key>.building/`` keeps `preprocess`'s per-case
  manifest); the folder is published, by a rename, only once complete and checked. When SRC is
  the real KiTS19 (all 210 labelled cases, none marked synthetic) and the closed padding (128)
  is used, the result must match the MLPerf reference's checksums before it is published.
- anything else: the readiness check's one-line error.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workloads.common import atomic
from workloads.common.errors import DataError
from workloads.unet3d.parallel import map_unordered, workers_for
from workloads.unet3d.preprocess import (
    CLOSED_MIN_SHAPE,
    PROCEDURE_VERSION,
    CaseResult,
    PreprocessConfig,
    preprocess_dataset,
    procedure_params,
)
from workloads.unet3d.raw_check import IMAGE_NAME, LABEL_NAME, list_raw_cases, read_kits_json, verify_raw
from workloads.unet3d.split import MAX_CASE_ID, case_name
from workloads.unet3d.verify import REFERENCE_CHECKSUMS, check_ready, file_md5, verify_checksums

READY_MARKER = ".mltrain-ready"
RAW_INDEX = "raw-index.json"
PREFIX = "kits19-"
KEY_LENGTH = 16


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What ``prepare`` found or made."""

    folder: Path
    """The training-ready folder."""
    made: bool
    """True when preprocessing ran now (False: SRC was ready, or the cache had it)."""
    verified: bool
    """True when the folder was checked against the MLPerf reference's checksums."""


def prepare(
    src: Path, cache: Path, *, min_shape: int = CLOSED_MIN_SHAPE, workers: int = 1,
    on_case: Callable[[CaseResult, int], None] | None = None,
) -> Prepared:
    """The training-ready folder for ``src`` (see the module docstring); DataError when there is none."""
    try:
        check_ready(src)
        return Prepared(folder=src, made=False, verified=False)
    except DataError as not_ready:
        if not _has_case_folders(src):
            raise not_ready from None
    workers = workers_for((src / case / name for case in list_raw_cases(src) for name in (IMAGE_NAME, LABEL_NAME)),
                          workers)
    cases = verify_raw(src, workers, read_data=False)  # headers only: fails in seconds, not hours in
    cache.mkdir(parents=True, exist_ok=True)
    key = content_key(src, cases, cache, min_shape, workers)
    final = cache / f"{PREFIX}{key}"
    reference = is_reference_kits19(src, cases) and min_shape == CLOSED_MIN_SHAPE
    with locked(cache / f".{PREFIX}{key}.lock"):
        if (final / READY_MARKER).is_file():
            marker = _read_json(final / READY_MARKER)
            verified = isinstance(marker, dict) and bool(marker.get("verified"))
            return Prepared(folder=final, made=False, verified=verified)
        building = cache / f".{PREFIX}{key}.building"
        preprocess_dataset(PreprocessConfig(raw_dir=src, out_dir=building, min_shape=min_shape, workers=workers),
                           on_case)
        if reference:
            verify_checksums(building, REFERENCE_CHECKSUMS, reference=True)
        check_ready(building)
        atomic.write_json(building / READY_MARKER, {
            "key": key, "source": str(src), "cases": len(cases), "min_shape": min_shape,
            "procedure_version": PROCEDURE_VERSION, "verified": reference,
        })
        os.replace(building, final)
    return Prepared(folder=final, made=True, verified=reference)


def content_key(src: Path, cases: list[str], cache: Path, min_shape: int, workers: int) -> str:
    """Hash of the procedure (version, parameters) and of every raw file's content (md5)."""
    files = [src / case / name for case in cases for name in (IMAGE_NAME, LABEL_NAME)]
    digests = file_md5s(files, cache / RAW_INDEX, workers)
    digest = hashlib.sha256(json.dumps({
        "procedure_version": PROCEDURE_VERSION,
        "params": procedure_params(min_shape),
        "files": [[path.relative_to(src).as_posix(), digests[path]] for path in files],
    }, sort_keys=True).encode())
    return digest.hexdigest()[:KEY_LENGTH]


def file_md5s(files: list[Path], index_path: Path, workers: int) -> dict[Path, str]:
    """md5 of each file, hashed in parallel; a file whose size and mtime are those ``index_path``
    recorded is not read again."""
    index = _read_json(index_path)
    if not isinstance(index, dict):
        index = {}
    found: dict[Path, str] = {}
    todo = []
    for path in files:
        stat = path.stat()
        known = index.get(str(path.resolve()))
        if isinstance(known, dict) and known.get("size") == stat.st_size and known.get("mtime_ns") == stat.st_mtime_ns:
            found[path] = str(known["md5"])
        else:
            todo.append((path,))
    for path, md5, size, mtime_ns in map_unordered(_md5_job, todo, workers):
        found[path] = md5
        index[str(path.resolve())] = {"size": size, "mtime_ns": mtime_ns, "md5": md5}
    if todo:
        atomic.write_json(index_path, index)
    return found


def is_reference_kits19(src: Path, cases: list[str]) -> bool:
    """All 210 labelled KiTS19 cases, and no kits.json entry saying it was generated."""
    if cases != [case_name(i) for i in range(MAX_CASE_ID)]:
        return False
    entries = read_kits_json(src)
    return not (isinstance(entries, list) and any(isinstance(e, dict) and e.get("synthetic") for e in entries))


def _md5_job(path: Path) -> tuple[Path, str, int, int]:
    stat = path.stat()
    return path, file_md5(path), stat.st_size, stat.st_mtime_ns


def _has_case_folders(src: Path) -> bool:
    try:
        list_raw_cases(src)
    except DataError:
        return False
    return True


def _read_json(path: Path) -> object:
    """The file's JSON value, None when it is missing or unreadable (nested too deep included)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One preparer per key at a time (a second waits, then finds the folder made)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
