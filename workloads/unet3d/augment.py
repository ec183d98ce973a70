"""Training augmentations of the benchmark, on NumPy arrays image (1, D, H, W) and label (1, D, H, W).

Order as in the reference: balanced crop, then flips, brightness and noise. Every function
takes the random generator explicitly, so a sample's augmentation depends only on its seed.

``augment`` does it all on the CPU. The training loader does only the crop on the CPU
(``crop_patch``) and draws the other decisions with ``draw_params`` (same generator calls in the
same order, so the same flips, brightness factor and noise level for a seed); the model's device
applies them per batch (``device_augment.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

FLIP_PROBABILITY = 1 / 3
BRIGHTNESS_PROBABILITY = 0.1
BRIGHTNESS_FACTOR = 0.3
NOISE_PROBABILITY = 0.1
NOISE_MAX_STD = 0.1

Box = tuple[slice, slice, slice]


def _randrange(rng: np.random.Generator, n: int) -> int:
    """Uniform in [0, n); 0 when n is 0 (the reference's helper)."""
    return 0 if n <= 0 else int(rng.integers(n))


def largest_component_boxes(label: np.ndarray, cls: int, keep: int = 2) -> list[Box]:
    """Bounding boxes (spatial slices) of the ``keep`` connected components of ``cls``
    with the largest box volume; ``label`` is (1, D, H, W)."""
    components, _ = ndimage.label(label[0] == cls)
    boxes = [b for b in ndimage.find_objects(components) if b is not None]
    volumes = [np.prod([s.stop - s.start for s in box]) for box in boxes]
    order = np.argsort(volumes, kind="stable")[-keep:]
    return [boxes[i] for i in order]


def foreground_classes(label: np.ndarray) -> np.ndarray:
    """The classes other than background present in ``label``, sorted."""
    return np.unique(label[label > 0])


def _place_over(box: slice, patch: int, size: int, rng: np.random.Generator) -> tuple[int, int]:
    """Start and stop of a ``patch``-long window over ``box`` on an axis of length ``size``,
    with a random margin, clamped to the axis (the reference's ``adjust``)."""
    diff = patch - (box.stop - box.start)
    sign = -1 if diff < 0 else 1
    diff = abs(diff)
    low_margin = _randrange(rng, diff)
    high_margin = diff - low_margin
    low = max(0, box.start - sign * low_margin)
    high = min(size, box.stop + sign * high_margin)
    missing = patch - (high - low)
    if missing > 0 and low == 0:
        high += missing
    elif missing > 0:
        low -= missing
    return low, high


def random_crop_box(shape: tuple[int, ...], patch: tuple[int, ...], rng: np.random.Generator) -> Box:
    starts = [_randrange(rng, s - p) for s, p in zip(shape, patch, strict=True)]
    return tuple(slice(a, a + p) for a, p in zip(starts, patch, strict=True))  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True)
class BalancedCrop:
    """With probability ``oversampling`` a patch over a foreground object, else a uniform one."""

    patch: tuple[int, int, int]
    """Patch size (D, H, W)."""
    oversampling: float = 0.4
    """Probability of a foreground crop."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.oversampling <= 1.0:
            raise ValueError(f"oversampling must be in [0, 1], got {self.oversampling}")

    def box(self, label: np.ndarray, rng: np.random.Generator, boxes_of=largest_component_boxes,
            classes_of=foreground_classes) -> Box:
        """Where to crop; ``boxes_of(label, cls)`` and ``classes_of(label)`` may be cached (pure functions)."""
        shape = label.shape[1:]
        if rng.random() < self.oversampling:
            classes = classes_of(label)
            if classes.size:
                cls = int(rng.choice(classes))
                boxes = boxes_of(label, cls)
                if boxes:
                    target = boxes[_randrange(rng, len(boxes))]
                    return tuple(  # type: ignore[return-value]
                        slice(*_place_over(b, p, n, rng))
                        for b, p, n in zip(target, self.patch, shape, strict=True)
                    )
        return random_crop_box(shape, self.patch, rng)


def flip(image: np.ndarray, label: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Flip each spatial axis with probability 1/3."""
    for axis in (1, 2, 3):
        if rng.random() < FLIP_PROBABILITY:
            image, label = np.flip(image, axis=axis), np.flip(label, axis=axis)
    return image, label


def brightness(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """With probability 0.1 multiply by (1 + f), f uniform in [0.7, 1.3] (the reference's formula)."""
    if rng.random() < BRIGHTNESS_PROBABILITY:
        factor = rng.uniform(1.0 - BRIGHTNESS_FACTOR, 1.0 + BRIGHTNESS_FACTOR)
        image = (image * (1 + factor)).astype(image.dtype)
    return image


def gaussian_noise(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """With probability 0.1 add N(0, s) noise, s uniform in [0, 0.1]."""
    if rng.random() < NOISE_PROBABILITY:
        std = rng.uniform(0.0, NOISE_MAX_STD)
        image = image + rng.normal(0.0, std, size=image.shape).astype(image.dtype)
    return image


# Columns of the per-sample parameter row that ``draw_params`` returns.
FLIP_COLUMNS = (0, 1, 2)  # 1.0: flip spatial axis D, H, W
SCALE_COLUMN = 3  # brightness multiplier (1.0: unchanged)
NOISE_STD_COLUMN = 4  # Gaussian noise standard deviation (0.0: no noise)
NOISE_SEED_COLUMN = 5  # seed of the noise values (< 2**53, exact in float64)
N_PARAMS = 6


def draw_params(rng: np.random.Generator) -> np.ndarray:
    """Flip, brightness and noise decisions of one sample (float64, (N_PARAMS,)), drawn with the same
    calls in the same order as ``flip``, ``brightness`` and ``gaussian_noise``; the noise values
    themselves are replaced by a seed for them."""
    params = np.zeros(N_PARAMS, dtype=np.float64)
    for column in FLIP_COLUMNS:
        params[column] = float(rng.random() < FLIP_PROBABILITY)
    params[SCALE_COLUMN] = 1.0
    if rng.random() < BRIGHTNESS_PROBABILITY:
        params[SCALE_COLUMN] = 1 + rng.uniform(1.0 - BRIGHTNESS_FACTOR, 1.0 + BRIGHTNESS_FACTOR)
    if rng.random() < NOISE_PROBABILITY:
        params[NOISE_STD_COLUMN] = rng.uniform(0.0, NOISE_MAX_STD)
        params[NOISE_SEED_COLUMN] = float(rng.integers(0, 2**53))
    return params


def crop_patch(
    image: np.ndarray,
    label: np.ndarray,
    crop: BalancedCrop,
    rng: np.random.Generator,
    boxes_of=largest_component_boxes,
    classes_of=foreground_classes,
) -> tuple[np.ndarray, np.ndarray]:
    """The balanced crop alone: contiguous float32 image and uint8 label patches (copies, so the
    source may be a read-only mmap)."""
    box = crop.box(label, rng, boxes_of, classes_of)
    patch = (slice(None), *box)
    return np.array(image[patch], dtype=np.float32, order="C"), np.array(label[patch], dtype=np.uint8, order="C")


def augment(
    image: np.ndarray,
    label: np.ndarray,
    crop: BalancedCrop,
    rng: np.random.Generator,
    boxes_of=largest_component_boxes,
) -> tuple[np.ndarray, np.ndarray]:
    """One training sample: (1, D, H, W) float32 image and uint8 label -> patch-sized, contiguous."""
    box = crop.box(label, rng, boxes_of)
    image, label = image[(slice(None), *box)], label[(slice(None), *box)]
    image, label = flip(image, label, rng)
    image = np.array(image, dtype=np.float32, order="C")  # always a copy: the source may be a read-only mmap
    label = np.array(label, dtype=np.uint8, order="C")
    image = gaussian_noise(brightness(image, rng), rng)
    return image, label
