"""3D-UNet's inference dataset, made once from the raw KiTS19 folder a user already has (the one
``mltrain data unet3d`` preprocesses for training), and the check of a made one.

    prepare SRC --cache DIR [--roi D,H,W] [--workers N]

- SRC is a prepared folder (its ``index.json`` lists every case file, sizes as recorded): SRC.
- SRC is raw KiTS19 (``case_XXXXX/imaging.nii.gz`` and ``segmentation.nii.gz``; ``kits.json`` not
  needed, nor any case but the inference cases, whatever their ids): the inference cases it holds
  (all 43 of ``inference_cases.json`` in the real data, ``case_00400`` from ``case_00185`` as the
  reference copies it) preprocessed by the reference's procedure (`preprocess`) into
  ``DIR/kits19-inference-<key>/``, the key a hash of the procedure, the ROI and every raw file's md5:
  the same raw data and ROI find the same folder again (a later call reads only sizes and mtimes).
  Cases run in parallel and an interrupted preparation resumes (``DIR/.kits19-inference-<key>.building``);
  the folder appears, by a rename, only complete. When SRC is the real KiTS19 and the ROI the
  reference's, every file's md5 is compared with the reference's ``checksum_inference.json``: the
  index records the result (``verified``, and the cases that differ), and a run on a folder that is
  not the reference's says so.
- anything else: one line naming what is missing.

The folder: ``case_XXXXX.pkl`` (the reference's files, byte for byte) and ``index.json`` (written
last): the ROI, per case its file, shape, md5, size and raw source, the checksum verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workloads.common import atomic
from workloads.common.errors import DataError
from workloads.inference.kits19.preprocess import (
    DUPLICATES,
    OVERLAP,
    PROCEDURE_VERSION,
    ROI_SHAPE,
    inference_cases,
    md5,
    pickle_bytes,
    preprocess_case,
    reference_checksums,
)
from workloads.unet3d.parallel import map_unordered, workers_for
from workloads.unet3d.prepare import file_md5s, is_reference_kits19, locked
from workloads.unet3d.raw_check import IMAGE_NAME, LABEL_NAME, check_raw_case, list_raw_cases

INDEX = "index.json"
INDEX_VERSION = 1
PREFIX = "kits19-inference-"
RAW_INDEX = "raw-index.json"
KEY_LENGTH = 16
PROGRESS = "progress.json"
"""In a folder being built: the entries of the cases done so far (resuming skips them)."""


@dataclass(frozen=True, kw_only=True)
class Prepared:
    folder: Path
    made: bool
    index: dict


def case_file(case: str) -> str:
    return f"{case}.pkl"


def read_index(folder: Path) -> dict:
    """The prepared folder's index, its files there with the sizes it records; DataError naming the
    first problem."""
    path = folder / INDEX
    if not folder.is_dir():
        raise DataError(f"{folder}: no such dataset folder")
    try:
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{folder}: no {INDEX}: not a prepared 3D-UNet dataset (give the raw KiTS19 folder, "
                        "kits19/data, and it is prepared once)") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc})") from None
    try:
        if index["version"] != INDEX_VERSION:
            raise DataError(f"{path}: index version {index['version']}, this harness reads {INDEX_VERSION}")
        cases = index["cases"]
        roi = [int(v) for v in index["roi"]]
        for entry in cases:
            file = folder / str(entry["file"])
            if not file.is_file():
                raise DataError(f"{file}: missing ({entry['case']} of {INDEX})")
            if file.stat().st_size != int(entry["size"]):
                raise DataError(f"{file}: {file.stat().st_size} bytes, {INDEX} recorded {entry['size']}")
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: not a 3D-UNet dataset index ({type(exc).__name__}: {exc})") from None
    if not cases or len(roi) != 3:
        raise DataError(f"{path}: lists no case or no ROI")
    return index


def select_cases(src: Path) -> list[tuple[str, str]]:
    """(inference case, the raw case folder it is made from) for each inference case ``src`` holds."""
    def present(case: str) -> bool:  # something under both names: a FIFO or a loop of links is named by the check
        return all(os.path.lexists(src / case / name) for name in (IMAGE_NAME, LABEL_NAME))

    chosen = []
    for case in inference_cases():
        if present(case):
            chosen.append((case, case))
        elif case in DUPLICATES and present(DUPLICATES[case]):
            chosen.append((case, DUPLICATES[case]))
    if not chosen:
        raise DataError(f"{src}: none of the 43 inference cases of the MLPerf reference (case_00000, case_00003, "
                        "...) is there: give the raw KiTS19 folder (kits19/data)")
    return chosen


def check_sources(src: Path, sources: list[str]) -> None:
    """The raw cases the inference cases are made from, their headers read (a broken one fails in
    seconds); only those: a folder holding the inference cases alone, whatever its case ids and with or
    without ``kits.json``, is a raw KiTS19 folder here. Read in this process: 43 headers take
    milliseconds, a worker process importing the preprocessing seconds, and every run asks."""
    problems = sorted(problem for problem in (check_raw_case(src / source, False) for source in sources)
                      if problem is not None)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DataError(f"{src}: {problems[0]}{more}")


def prepare(src: Path, cache: Path, *, roi: Sequence[int] = ROI_SHAPE, workers: int = 1,
            on_case: Callable[[str], None] | None = None) -> Prepared:
    """The prepared folder for ``src`` (see the module docstring)."""
    try:
        return Prepared(folder=src, made=False, index=read_index(src))
    except DataError as not_prepared:
        try:
            raw_cases = list_raw_cases(src)
        except DataError:
            raise not_prepared from None
    roi = tuple(int(v) for v in roi)
    if len(roi) != 3 or min(roi) < 2:
        raise DataError(f"--roi {roi}: give D,H,W, each at least 2")
    chosen = select_cases(src)
    check_sources(src, sorted({source for _, source in chosen}))
    cache.mkdir(parents=True, exist_ok=True)
    sources = sorted({source for _, source in chosen})
    files = [src / source / name for source in sources for name in (IMAGE_NAME, LABEL_NAME)]
    workers = workers_for(files, workers)
    digests = file_md5s(files, cache / RAW_INDEX, workers)
    key = hashlib.sha256(json.dumps({
        "procedure_version": PROCEDURE_VERSION, "roi": roi, "overlap": OVERLAP,
        "cases": chosen, "files": [[path.relative_to(src).as_posix(), digests[path]] for path in files],
    }, sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]
    final = cache / f"{PREFIX}{key}"
    reference = is_reference_kits19(src, raw_cases) and roi == ROI_SHAPE and len(chosen) == len(inference_cases())
    with locked(cache / f".{PREFIX}{key}.lock"):
        if (final / INDEX).is_file():
            return Prepared(folder=final, made=False, index=read_index(final))
        building = cache / f".{PREFIX}{key}.building"
        building.mkdir(exist_ok=True)
        started = time.monotonic()
        entries = _build(src, building, chosen, roi, workers, on_case)
        index = {
            "version": INDEX_VERSION, "procedure_version": PROCEDURE_VERSION, "roi": list(roi), "overlap": OVERLAP,
            "source": str(src), "key": key, "cases": entries, "reference_data": reference,
            "seconds": round(time.monotonic() - started, 1),
            **_verdict(entries, reference),
        }
        atomic.write_json(building / INDEX, index)
        (building / PROGRESS).unlink(missing_ok=True)
        os.replace(building, final)
    return Prepared(folder=final, made=True, index=index)


def _build(src: Path, building: Path, chosen: list[tuple[str, str]], roi: tuple[int, ...], workers: int,
           on_case: Callable[[str], None] | None) -> list[dict]:
    """Every chosen case preprocessed into ``building`` (those a previous attempt finished kept)."""
    progress = building / PROGRESS
    try:
        done = {e["case"]: e for e in json.loads(progress.read_text()) if (building / e["file"]).is_file()
                and (building / e["file"]).stat().st_size == e["size"]}
    except (OSError, ValueError, KeyError, TypeError):
        done = {}
    jobs = [(src / source, building / case_file(case), case, source, roi) for case, source in chosen
            if case not in done]
    for entry in map_unordered(_case_job, jobs, workers):
        done[entry["case"]] = entry
        atomic.write_json(progress, sorted(done.values(), key=lambda e: e["case"]))
        if on_case:
            on_case(entry["case"])
    return [done[case] for case, _ in chosen]


def _case_job(case_dir: Path, out: Path, case: str, source: str, roi: tuple[int, ...]) -> dict:
    started = time.perf_counter()
    made = preprocess_case(case_dir, roi)
    data = pickle_bytes(made.image, made.label)
    atomic.write_bytes(out, data)
    return {"case": case, "file": out.name, "source": source, "shape": list(made.image.shape), "md5": md5(data),
            "size": len(data), "spacing": made.spacing, "zoom": made.zoom,
            "seconds": round(time.perf_counter() - started, 2)}


def _verdict(entries: list[dict], reference: bool) -> dict:
    """Whether the files are the reference's: compared only for the real KiTS19 at the reference's ROI."""
    if not reference:
        return {"verified": False, "checksum_mismatches": []}
    expected = reference_checksums()
    bad = [e["case"] for e in entries if expected.get(e["file"]) != e["md5"]]
    return {"verified": not bad, "checksum_mismatches": bad}
