"""Training and evaluation data of a preprocessed unet3d dataset (``case_XXXXX_x.npy`` / ``_y.npy``).

Randomness is per sample: the sampler yields ``(case index, sample seed)`` pairs, the seeds
drawn from the epoch's shuffling seed, so a run is reproducible whatever the number of
DataLoader workers. Shuffling is the same on every rank (seeded by the epoch), each rank
takes its own slice of the permutation, and the incomplete last global batch is dropped.

Workers do the cheap part on the CPU: the balanced crop, a slice of a memory-mapped case copied
out, and the draw of the sample's flip/brightness/noise decisions. The model's device applies
those (``device_augment.py``). Batches are ``(image, label, params)``; on CUDA they arrive in
pinned memory so that their copies to the GPU do not block.

Nothing here opens a file until a batch or a case is asked for: the dataset is first touched
after run_start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from workloads.common.errors import DataError
from workloads.unet3d.augment import (
    BalancedCrop,
    crop_patch,
    draw_params,
    foreground_classes,
    largest_component_boxes,
)
from workloads.unet3d.cuts import foreground_crop
from workloads.unet3d.split import image_file, label_file


def load_case(data_dir: Path, case: str, mmap: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Image (1, D, H, W) float32 and label (1, D, H, W) uint8 of one case; DataError when unusable."""
    mode = "r" if mmap else None
    try:
        image = np.load(data_dir / image_file(case), mmap_mode=mode, allow_pickle=False)
        label = np.load(data_dir / label_file(case), mmap_mode=mode, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataError(f"{data_dir}: {case}: cannot load ({' '.join(str(err).split())})") from None
    if image.ndim != 4 or image.shape != label.shape:
        raise DataError(f"{data_dir}: {case}: image {image.shape} and label {label.shape} must be (1, D, H, W)")
    return image, label


def npy_shape(path: Path) -> tuple[int, ...]:
    """The array shape in a .npy file's header (reads the header only); DataError when unreadable."""
    try:
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, _ = read_header(handle)  # the header alone
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: cannot read the .npy header ({' '.join(str(err).split())})") from None
    return tuple(int(n) for n in shape)


def check_shapes(data_dir: Path, cases: Sequence[str], patch: tuple[int, int, int]) -> None:
    """Image and label headers agree, are (1, D, H, W) and at least one ``patch`` large; DataError otherwise.

    Reads two headers per case: call it after run_start."""
    for case in cases:
        image, label = npy_shape(data_dir / image_file(case)), npy_shape(data_dir / label_file(case))
        if len(image) != 4 or image != label:
            raise DataError(f"{data_dir}: {case}: image {image} and label {label} must be (1, D, H, W)")
        if any(s < p for s, p in zip(image[1:], patch, strict=True)):
            raise DataError(f"{data_dir}: {case}: shape {image[1:]} is smaller than the patch {patch}")


class TrainDataset(Dataset):
    """Random patches of the training cases; item key: (case index, sample seed) ->
    (image (1, D, H, W) float32, label (1, D, H, W) uint8, params (N_PARAMS,) float64)."""

    def __init__(self, data_dir: Path, cases: Sequence[str], crop: BalancedCrop) -> None:
        self.data_dir, self.cases, self.crop = data_dir, list(cases), crop
        self._boxes: dict[int, tuple[slice, ...]] = {}  # per process: each case's crop, found once
        self._boxes: dict[tuple[int, int], list] = {}  # per process: component boxes per (case, class)
        self._classes: dict[int, np.ndarray] = {}  # per process: foreground classes per case

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        index, seed = key
        image, label = load_case(self.data_dir, self.cases[index], mmap=True)

        def boxes_of(lab: np.ndarray, cls: int) -> list:
            if (index, cls) not in self._boxes:  # a pure function of the label: cache it
                self._boxes[(index, cls)] = largest_component_boxes(lab, cls)
            return self._boxes[(index, cls)]

        def classes_of(lab: np.ndarray) -> np.ndarray:
            if index not in self._classes:  # a full pass over the label: once per case and process
                self._classes[index] = foreground_classes(lab)
            return self._classes[index]

        rng = np.random.default_rng(seed)
        x, y = crop_patch(image, label, self.crop, rng, boxes_of, classes_of)
        return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(draw_params(rng))


class ShardedShuffleSampler(Sampler):
    """Per epoch: one permutation shared by all ranks (seeded by master seed and epoch),
    truncated to whole global batches; rank r takes positions r, r + world, ...

    Yields (case index, per-sample augmentation seed)."""

    def __init__(self, n_cases: int, global_batch: int, rank: int, world: int, master_seed: int) -> None:
        if n_cases < global_batch:
            raise DataError(f"{n_cases} training cases are fewer than one global batch of {global_batch}")
        self.n_cases, self.global_batch = n_cases, global_batch
        self.rank, self.world, self.master_seed = rank, world, master_seed
        self.epoch = 1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return (self.n_cases // self.global_batch) * self.global_batch // self.world

    def __iter__(self) -> Iterator[tuple[int, int]]:
        rng = np.random.default_rng([self.master_seed, self.epoch])
        order = rng.permutation(self.n_cases)[: len(self) * self.world]
        seeds = rng.integers(0, 2**63 - 1, size=order.size)
        for position in range(self.rank, order.size, self.world):
            yield int(order[position]), int(seeds[position])


@dataclass(frozen=True, kw_only=True)
class LoaderSettings:
    """How batches are assembled."""

    batch_size: int
    """Samples per rank per step."""
    num_workers: int = 0
    """DataLoader worker processes (0: load in the training process)."""
    pin_memory: bool = False
    """Hand batches over in pinned host memory (for non-blocking copies to a GPU)."""

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.num_workers < 0:
            raise ValueError("batch_size must be >= 1 and num_workers >= 0")


def train_loader(dataset: TrainDataset, sampler: ShardedShuffleSampler, settings: LoaderSettings) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=settings.batch_size,
        sampler=sampler,
        num_workers=settings.num_workers,
        pin_memory=settings.pin_memory,
        drop_last=True,
        persistent_workers=settings.num_workers > 0,
        prefetch_factor=2 if settings.num_workers > 0 else None,
    )


class EvalDataset(Dataset):
    """Whole evaluation cases: index -> (image (1, D, H, W) float32, label (1, D, H, W) uint8); with
    ``crop`` (a smoke run's cut, cuts.py), at most that much of each around its foreground."""

    def __init__(self, data_dir: Path, cases: Sequence[str], crop: tuple[int, int, int] | None = None) -> None:
        self.data_dir, self.cases, self.crop = data_dir, list(cases), crop
        self._boxes: dict[int, tuple[slice, ...]] = {}  # per process: each case's crop, found once

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image, label = load_case(self.data_dir, self.cases[index])
        if self.crop is not None:
            if index not in self._boxes:
                self._boxes[index] = foreground_crop(label, self.crop)
            box = self._boxes[index]
            image, label = np.ascontiguousarray(image[box]), np.ascontiguousarray(label[box])
        return torch.from_numpy(image), torch.from_numpy(label)


def eval_loader(dataset: EvalDataset, settings: LoaderSettings) -> DataLoader:
    """One case at a time (no collation), read ahead by one worker when the settings have workers."""
    workers = min(1, settings.num_workers)
    return DataLoader(
        dataset,
        batch_size=None,
        shuffle=False,
        num_workers=workers,
        pin_memory=settings.pin_memory,
        persistent_workers=workers > 0,
    )


def eval_cases_of_rank(cases: Sequence[str], rank: int, world: int) -> list[str]:
    """Evaluation is split over ranks round robin; the Dice sums are reduced afterwards."""
    return list(cases[rank::world])
