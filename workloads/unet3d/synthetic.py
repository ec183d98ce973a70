"""A KiTS19-like synthetic case, made in memory (``synthetic_raw.py`` writes cases in the raw
layout the real data has).

Each case is an abdominal cross-section like a contrast CT: air, a body with subcutaneous fat
and soft tissue, liver, spine, aorta and vena cava, and two kidneys (bright enhancing cortex,
darker medulla) wrapped in perirenal fat, with a darker heterogeneous tumour inside or
bulging out of one kidney (sometimes both), of varying size. Smooth texture, a little blur and
noise make it CT-like while keeping kidney and tumour learnable. Spacing is anisotropic in the
real range (slices 0.5-5 mm, in-plane 0.5-1 mm). Case ``k`` of seed ``s`` depends only on
(s, k), so cases can be made in parallel and a larger set extends a smaller one.

Sizes: ``real`` is 512 x 512 in-plane with a KiTS19-like number of slices; the other sizes
give the approximate shape AFTER preprocessing (resampling to 1.6 x 1.2 x 1.2 mm), so that
``D,H,W`` says how big the training volumes will be whatever spacing a case draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage
from torch.nn.functional import interpolate

from workloads.common.errors import DataError
from workloads.unet3d.split import case_name

TARGET_SPACING = (1.6, 1.2, 1.2)  # mm, the preprocessing's target (slices, rows, cols)
SIZE_PRESETS = {"tiny": (24, 32, 32), "small": (64, 64, 64)}
REAL_IN_PLANE = 512
REAL_ORGAN_SCALE = 0.54  # kidneys about 11 cm long in a 40 cm field of view
ZOOMED_ORGAN_SCALE = 1.3  # smaller fields of view: kidneys fill more of the volume (learnable)
SLICE_SPACINGS = (0.5, 0.8, 1.0, 1.25, 2.5, 3.0, 5.0)  # mm, KiTS19 has all of these
SLICE_WEIGHTS = (0.05, 0.05, 0.1, 0.05, 0.2, 0.2, 0.35)

# Hounsfield units of the tissues (contrast-enhanced CT, nephrographic phase).
HU_AIR = -1000.0
HU_FAT = -95.0
HU_SOFT_TISSUE = 45.0
HU_LIVER = 70.0
HU_BONE = 420.0
HU_MARROW = 230.0
HU_AORTA = 165.0
HU_CAVA = 120.0
HU_CORTEX = 215.0
HU_MEDULLA = 175.0
HU_TUMOUR = 95.0


@dataclass(frozen=True, kw_only=True)
class SizeSpec:
    """How big the generated volumes are."""

    preprocessed_shape: tuple[int, int, int] | None
    """Approximate (D, H, W) after resampling to the target spacing; None: real 512 x 512 x N."""

    def __post_init__(self) -> None:
        shape = self.preprocessed_shape
        if shape is not None and (len(shape) != 3 or min(shape) < 8):
            raise DataError(f"--size {shape}: need three sizes D,H,W of at least 8")


def parse_size(text: str) -> SizeSpec:
    """``tiny``, ``small``, ``real`` or ``D,H,W`` (the shape after preprocessing, approximately)."""
    if text == "real":
        return SizeSpec(preprocessed_shape=None)
    if text in SIZE_PRESETS:
        return SizeSpec(preprocessed_shape=SIZE_PRESETS[text])
    parts = text.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() for part in parts):
        raise DataError(f"--size {text!r}: expected tiny, small, real or D,H,W (e.g. 64,96,96)")
    depth, height, width = (int(part) for part in parts)
    return SizeSpec(preprocessed_shape=(depth, height, width))


@dataclass(frozen=True, kw_only=True)
class SyntheticCase:
    """One generated case, in the raw layout's axis order (slices, rows, cols)."""

    name: str
    """Case id, ``case_XXXXX``."""
    image: np.ndarray
    """CT in Hounsfield units, int16, (D, H, W)."""
    label: np.ndarray
    """0 background, 1 kidney, 2 tumour, uint8, (D, H, W)."""
    spacing: tuple[float, float, float]
    """Voxel size in mm (slices, rows, cols) as stored in the header (float32 values)."""
    tumour_sides: tuple[str, ...]
    """Which kidneys carry a tumour ("left", "right")."""


class _Grid:
    """Voxel-centre coordinates of a raw volume, in units of half the in-plane field of view."""

    def __init__(self, shape: tuple[int, int, int], spacing: tuple[float, float, float]) -> None:
        self.shape = shape
        self.unit_mm = min(shape[1] * spacing[1], shape[2] * spacing[2]) / 2
        self.axes = [
            ((np.arange(n, dtype=np.float32) - (n - 1) / 2) * (step / self.unit_mm)).astype(np.float32)
            for n, step in zip(shape, spacing, strict=True)
        ]
        self.half_extent = [n * step / 2 / self.unit_mm for n, step in zip(shape, spacing, strict=True)]

    def box(self, center: np.ndarray, radius: float) -> tuple[slice, slice, slice] | None:
        """Index ranges covering a cube of ``radius`` around ``center``; None when outside."""
        slices = []
        for axis, c in zip(self.axes, center, strict=True):
            lo = int(np.searchsorted(axis, c - radius, side="left"))
            hi = int(np.searchsorted(axis, c + radius, side="right"))
            if hi <= lo:
                return None
            slices.append(slice(lo, hi))
        return slices[0], slices[1], slices[2]

    def offsets(self, box: tuple[slice, slice, slice], center: np.ndarray) -> list[np.ndarray]:
        """Broadcastable coordinate differences to ``center`` inside ``box``: (d, 1, 1), (1, h, 1), (1, 1, w)."""
        dz = self.axes[0][box[0]] - center[0]
        dy = self.axes[1][box[1]] - center[1]
        dx = self.axes[2][box[2]] - center[2]
        return [dz[:, None, None], dy[None, :, None], dx[None, None, :]]


@dataclass(frozen=True)
class _Ellipsoid:
    center: np.ndarray  # (z, y, x) in grid units
    semi_axes: np.ndarray  # (z, y, x) in grid units, before rotation
    rotation: np.ndarray  # 3 x 3, columns are the ellipsoid's axes

    def scaled(self, factor: float) -> _Ellipsoid:
        return _Ellipsoid(self.center, self.semi_axes * factor, self.rotation)

    def radius_field(self, grid: _Grid) -> tuple[tuple[slice, slice, slice], np.ndarray] | None:
        """(box, rho) where rho <= 1 inside the ellipsoid (rho = normalised radius)."""
        box = grid.box(self.center, float(self.semi_axes.max()))
        if box is None:
            return None
        dz, dy, dx = grid.offsets(box, self.center)
        total = np.zeros([s.stop - s.start for s in box], dtype=np.float32)
        for k in range(3):
            r = self.rotation[:, k]
            along = r[0] * dz + r[1] * dy + r[2] * dx
            total += (along / self.semi_axes[k]) ** 2
        return box, np.sqrt(total)


def _rotation(rng: np.random.Generator, max_degrees: float) -> np.ndarray:
    """A random rotation with each Euler angle within +-max_degrees."""
    a, b, c = np.radians(rng.uniform(-max_degrees, max_degrees, size=3))
    rz = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    rx = np.array([[math.cos(c), -math.sin(c), 0], [math.sin(c), math.cos(c), 0], [0, 0, 1]])
    return (rz @ ry @ rx).astype(np.float32)


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: tuple[float, ...]) -> np.ndarray:
    """Smooth Gaussian noise (correlation length ``sigma`` voxels), unit standard deviation, float32.

    Filtered on a grid coarsened to about sigma / 1.5 per axis, then trilinearly upsampled:
    the same look as filtering at full resolution for a fraction of the time on 512 x 512 slices.
    """
    factors = [max(1, int(s / 1.5)) for s in sigma]
    coarse_shape = [max(2, -(-n // f) + 1) for n, f in zip(shape, factors, strict=True)]
    coarse = rng.standard_normal(coarse_shape, dtype=np.float32)
    coarse = ndimage.gaussian_filter(coarse, sigma=[s / f for s, f in zip(sigma, factors, strict=True)])
    if any(f > 1 for f in factors):
        stretched = [(n - 1) * f for n, f in zip(coarse_shape, factors, strict=True)]
        full = interpolate(
            torch.from_numpy(coarse)[None, None], size=stretched, mode="trilinear", align_corners=True
        )[0, 0]
        field = np.ascontiguousarray(full[: shape[0], : shape[1], : shape[2]].numpy())
    else:
        field = coarse[: shape[0], : shape[1], : shape[2]]
    return field / max(float(field.std()), 1e-6)


def _draw_spacing(rng: np.random.Generator) -> tuple[float, float, float]:
    slice_mm = float(rng.choice(SLICE_SPACINGS, p=SLICE_WEIGHTS))
    in_plane = float(np.float32(round(float(rng.uniform(0.5, 1.0)), 4)))
    return float(np.float32(slice_mm)), in_plane, in_plane


def _raw_shape(rng: np.random.Generator, size: SizeSpec, spacing: tuple[float, float, float]) -> tuple[int, ...]:
    if size.preprocessed_shape is None:
        z_extent_mm = rng.uniform(120.0, 260.0)
        return max(8, round(z_extent_mm / spacing[0])), REAL_IN_PLANE, REAL_IN_PLANE
    return tuple(
        max(4, round(n * target / step))
        for n, target, step in zip(size.preprocessed_shape, TARGET_SPACING, spacing, strict=True)
    )


def tumour_hu(contrast: float) -> float:
    """Base HU of tumour tissue: ``contrast`` scales its distance below the medulla (1.0: the default)."""
    if contrast == 1.0:
        return HU_TUMOUR
    return HU_MEDULLA - contrast * (HU_MEDULLA - HU_TUMOUR)


def generate_case(index: int, seed: int, size: SizeSpec, tumour_contrast: float = 1.0) -> SyntheticCase:
    """Case ``index`` of the synthetic set of ``seed``; the same arguments give the same arrays.

    ``tumour_contrast`` > 1 makes tumours darker (easier to tell from kidney); 1.0 is the default look."""
    tumour_base = tumour_hu(tumour_contrast)
    rng = np.random.default_rng([seed, index])
    spacing = _draw_spacing(rng)
    shape = _raw_shape(rng, size, spacing)
    grid = _Grid(shape, spacing)  # type: ignore[arg-type]
    # Texture smoothness in voxels: about 2 mm in-plane and along the slices.
    sigma_fine = tuple(max(0.5, 2.0 / step) for step in spacing)
    texture = _smooth_noise(rng, shape, sigma_fine)
    coarse = _smooth_noise(rng, shape, tuple(3 * s for s in sigma_fine))

    hu = np.full(shape, HU_AIR, dtype=np.float32)
    label = np.zeros(shape, dtype=np.uint8)
    _paint_body(rng, grid, hu, texture)
    # Whole-abdomen fields of view (real) show kidneys of real size; smaller ones are zoomed in.
    kidneys = _kidneys(rng, grid, REAL_ORGAN_SCALE if size.preprocessed_shape is None else ZOOMED_ORGAN_SCALE)
    sides = ("right", "left")  # image left is the patient's right
    for kidney in kidneys:
        _paint(grid, kidney.scaled(1.45), hu, lambda rho, box: HU_FAT + 8 * texture[box])
    for kidney in kidneys:
        _paint(
            grid,
            kidney,
            hu,
            lambda rho, box: np.where(rho > 0.72, HU_CORTEX, HU_MEDULLA) + 10 * texture[box],
            label,
            1,
        )
    with_tumour = [0, 1] if rng.uniform() < 0.2 else [int(rng.integers(2))]
    for k in with_tumour:
        for lobe in _tumour_lobes(rng, kidneys[k]):
            _paint(
                grid,
                lobe,
                hu,
                lambda rho, box: tumour_base + 12 * coarse[box] + 8 * texture[box] - 10 * (1 - rho),
                label,
                2,
            )
    # Scanner blur (about 1 mm) and quantum noise.
    hu = ndimage.gaussian_filter(hu, sigma=tuple(max(0.3, 0.8 / step) for step in spacing), truncate=3.0)
    hu += rng.standard_normal(shape, dtype=np.float32) * np.float32(rng.uniform(5.0, 10.0))
    image = np.clip(np.rint(hu), -1024, 3071).astype(np.int16)
    return SyntheticCase(
        name=case_name(index),
        image=image,
        label=label,
        spacing=spacing,
        tumour_sides=tuple(sides[k] for k in with_tumour),
    )


def _paint(grid, shape: _Ellipsoid, hu, value, label=None, label_value=0) -> None:
    """Set ``hu`` (and ``label``) inside ``shape``; ``value(rho, box)`` gives the HU there."""
    found = shape.radius_field(grid)
    if found is None:
        return
    box, rho = found
    inside = rho <= 1.0
    values = np.broadcast_to(value(rho, box), rho.shape)
    hu[box][inside] = values[inside]
    if label is not None:
        label[box][inside] = label_value


def _paint_column(grid: _Grid, center_yx: tuple[float, float], radii: tuple[float, float], hu, value) -> None:
    """Set ``hu`` inside an elliptic cylinder along the slice axis; ``value(box)`` gives the HU there."""
    dy = grid.axes[1][:, None] - center_yx[0]
    dx = grid.axes[2][None, :] - center_yx[1]
    inside = (dy / radii[0]) ** 2 + (dx / radii[1]) ** 2 <= 1.0  # (H, W), the same on every slice
    rows, cols = np.nonzero(inside.any(axis=1))[0], np.nonzero(inside.any(axis=0))[0]
    if rows.size == 0:
        return
    box = (slice(None), slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    window = inside[box[1], box[2]]
    values = np.broadcast_to(value(box), hu[box].shape)
    hu[box][:, window] = values[:, window]


def _paint_body(rng: np.random.Generator, grid: _Grid, hu: np.ndarray, texture: np.ndarray) -> None:
    half_y, half_x = grid.half_extent[1], grid.half_extent[2]
    body = (rng.uniform(0.78, 0.88) * half_y, rng.uniform(0.9, 0.97) * half_x)
    fat = rng.uniform(0.06, 0.12)
    _paint_column(grid, (0.0, 0.0), body, hu, lambda box: HU_FAT + 10 * texture[box])
    inner = (body[0] - fat, body[1] - fat)
    _paint_column(grid, (0.0, 0.0), inner, hu, lambda box: HU_SOFT_TISSUE + 10 * texture[box])
    liver = _Ellipsoid(
        np.array([rng.uniform(0.2, 0.6), rng.uniform(-0.35, -0.15), -rng.uniform(0.3, 0.45)], np.float32),
        np.array([0.6, 0.45, 0.4], np.float32) * rng.uniform(0.85, 1.1),
        _rotation(rng, 10),
    )
    _paint(grid, liver, hu, lambda rho, box: HU_LIVER + 8 * texture[box])
    spine_y = rng.uniform(0.5, 0.6) * body[0]
    _paint_column(grid, (spine_y, 0.0), (0.13, 0.13), hu, lambda box: HU_BONE)
    _paint_column(grid, (spine_y, 0.0), (0.1, 0.1), hu, lambda box: HU_MARROW + 20 * texture[box])
    vessel_y = spine_y - rng.uniform(0.2, 0.25)
    _paint_column(grid, (vessel_y, 0.07), (0.055, 0.055), hu, lambda box: HU_AORTA)
    _paint_column(grid, (vessel_y, -0.1), (0.07, 0.05), hu, lambda box: HU_CAVA)


def _kidneys(rng: np.random.Generator, grid: _Grid, organ_scale: float) -> list[_Ellipsoid]:
    half_z = grid.half_extent[0]
    kidneys = []
    for side in (-1.0, 1.0):
        semi = np.array(
            [rng.uniform(0.4, 0.48), rng.uniform(0.22, 0.27), rng.uniform(0.19, 0.23)], dtype=np.float32
        ) * organ_scale
        z_room = max(0.0, half_z - semi[0])  # the whole kidney inside the scan when it fits
        center = np.array(
            [rng.uniform(-z_room, z_room), rng.uniform(0.18, 0.28), side * rng.uniform(0.45, 0.52)],
            dtype=np.float32,
        )
        kidneys.append(_Ellipsoid(center, semi, _rotation(rng, 20)))
    return kidneys


def _tumour_lobes(rng: np.random.Generator, kidney: _Ellipsoid) -> list[_Ellipsoid]:
    """One to three overlapping ellipsoids centred inside or on the surface of ``kidney``."""
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    depth = rng.uniform(0.35, 0.95)  # 0: kidney centre, 1: its surface
    center = kidney.center + kidney.rotation @ (kidney.semi_axes * direction * depth)
    radius = float(kidney.semi_axes.mean()) * rng.uniform(0.6, 1.0)
    lobes = [_Ellipsoid(center.astype(np.float32), radius * rng.uniform(0.85, 1.15, 3), _rotation(rng, 45))]
    for _ in range(int(rng.integers(0, 3))):
        offset = rng.normal(size=3)
        offset *= radius * 0.6 / np.linalg.norm(offset)
        semi = radius * rng.uniform(0.45, 0.75) * rng.uniform(0.85, 1.15, 3)
        lobes.append(_Ellipsoid((center + offset).astype(np.float32), semi, _rotation(rng, 45)))
    return [
        _Ellipsoid(lobe.center, lobe.semi_axes.astype(np.float32), lobe.rotation.astype(np.float32))
        for lobe in lobes
    ]
