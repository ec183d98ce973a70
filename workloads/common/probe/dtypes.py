"""Which dtypes a device runs natively, by the workloads' one precision rule
(`workloads.common.precision`: its table of GPU generations, and the CPU's flags), and TF32 as the
fp32 mode it is. A dtype the device would only emulate is skipped, with the reason.

``torch.cuda.is_bf16_supported()`` is not asked: it counts emulation (True on a V100 or T4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from workloads.common import precision
from workloads.common.probe.device import Device

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
"""The tensors' dtype of each probe dtype (tf32: fp32 tensors, tensor-core matmuls)."""
CPU_REFUSED = {
    "tf32": "TF32 is a CUDA tensor-core mode; this is a CPU",
    "bf16": "no native bf16 on this CPU (no AVX-512 BF16 or AMX flag; it would be emulated)",
    "fp16": "no native fp16 matrix multiply on CPU",
}


def native(device: Device, name: str) -> tuple[torch.dtype | None, str | None]:
    """(torch dtype, None), or (None, why this device cannot run ``name`` natively)."""
    if name not in TORCH_DTYPES:
        return None, f"unknown dtype {name!r}"
    if name == "fp32":
        return torch.float32, None
    if not device.cuda:
        if name == "bf16" and precision.cpu_bf16_native():
            return torch.bfloat16, None
        return None, CPU_REFUSED[name]
    major, minor = torch.cuda.get_device_capability(0)
    capability = (int(major), int(minor))
    generation = precision.generation(capability)
    supported = {"tf32": generation.tf32, "bf16": generation.native_bf16, "fp16": generation.fp16_tensor_cores}
    if not supported[name]:
        return None, (f"no native {name} on {generation.name} (compute capability"
                      f" {precision.capability_text(capability)}); it would be emulated")
    return TORCH_DTYPES[name], None


@contextlib.contextmanager
def tf32(device: Device, backend: object, name: str) -> Iterator[None]:
    """TF32 on ``backend`` (``torch.backends.cuda.matmul`` or ``torch.backends.cudnn``) for a case of
    dtype ``name`` only, as it was before afterwards; nothing on the CPU."""
    if not device.cuda:
        yield
        return
    previous = backend.allow_tf32  # type: ignore[attr-defined]
    backend.allow_tf32 = name == "tf32"  # type: ignore[attr-defined]
    try:
        yield
    finally:
        backend.allow_tf32 = previous  # type: ignore[attr-defined]
