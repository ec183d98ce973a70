"""The one precision rule of every workload: GPU generations by compute capability, and the choice.

``GENERATIONS`` is the table: what each NVIDIA generation runs natively (bf16, fp16 tensor cores,
tf32, fp8), by compute capability. ``choose`` picks the training precision from it:

- a GPU with native bf16 (compute capability 8.0 on: Ampere, Ada, Hopper, Blackwell): bf16 autocast;
- a GPU with fp16 tensor cores but no native bf16 (7.x: Volta, Turing): fp16 autocast with a
  GradScaler; a forced bf16 there is refused rather than emulated (``torch.cuda.is_bf16_supported()``
  says True on a V100 or T4, counting emulation: the table is asked instead);
- an older GPU (Pascal and before): fp32;
- a CPU: bf16 only where it runs bf16 natively (AVX-512 BF16 or AMX on x86, the BF16 extension on
  Arm; ``cpu_bf16_native`` reads the flags), else fp32 (emulated bf16 is several times slower).

What was asked for (``auto`` or a precision) is honoured where the device can run it. Nothing here
imports torch: the qualification probe and the workloads' command lines import this module before
(or without) torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PRECISIONS = ("fp32", "bf16", "fp16")
"""Training precisions: the autocast dtype (fp32: none); fp16 comes with a GradScaler."""
REQUESTS = ("auto", *PRECISIONS)
"""What a run may ask for."""
ALIASES = {"none": "fp32", "fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "auto": "auto"}
"""Accepted spellings (``none``: no autocast, fp32)."""
CPUINFO = Path("/proc/cpuinfo")
X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""/proc/cpuinfo ``flags`` that mean native bf16 arithmetic on x86 (Cooper Lake, Sapphire Rapids, Zen 4 on)."""
ARM_BF16_FEATURES = ("bf16",)
"""/proc/cpuinfo ``Features`` that mean native bf16 on Arm (Armv8.6 BF16: Neoverse V1/V2, Graviton 3, Grace)."""


class PrecisionError(ValueError):
    """A precision that cannot be used: not a precision at all, or not native on this device."""


class UnknownPrecision(PrecisionError):
    """Not one of REQUESTS (or an alias)."""


class UnsupportedPrecision(PrecisionError):
    """A precision this device has no native support for (bf16 below compute capability 8.0)."""


@dataclass(frozen=True, kw_only=True)
class Generation:
    """One GPU generation: its compute capabilities and what it runs natively."""

    name: str
    """Architecture name (Volta, Ampere...)."""
    majors: tuple[int, ...]
    """Compute capability majors of the generation."""
    minors: tuple[int, ...] | None
    """Minors among them (None: any)."""
    examples: str
    """Cards of this generation, for people reading the table."""
    native_bf16: bool
    """bf16 arithmetic in hardware (tensor cores), not emulated through fp32."""
    fp16_tensor_cores: bool
    """fp16 matrix multiply on tensor cores."""
    tf32: bool
    """tf32 tensor cores (fp32 matmuls and convolutions at reduced mantissa)."""
    fp8: bool
    """fp8 tensor cores (Transformer Engine)."""

    def covers(self, capability: tuple[int, int]) -> bool:
        major, minor = capability
        return major in self.majors and (self.minors is None or minor in self.minors)

    @property
    def lowest(self) -> tuple[int, int]:
        return (self.majors[0], self.minors[0] if self.minors else 0)


GENERATIONS: tuple[Generation, ...] = (
    Generation(name="Maxwell", majors=(5,), minors=None, examples="M40, M60, GTX 9xx",
               native_bf16=False, fp16_tensor_cores=False, tf32=False, fp8=False),
    Generation(name="Pascal", majors=(6,), minors=None, examples="P100 (6.0), P40, P4, GTX 10xx (6.1)",
               native_bf16=False, fp16_tensor_cores=False, tf32=False, fp8=False),
    Generation(name="Volta", majors=(7,), minors=(0, 2), examples="V100 (7.0), Jetson Xavier (7.2)",
               native_bf16=False, fp16_tensor_cores=True, tf32=False, fp8=False),
    Generation(name="Turing", majors=(7,), minors=(5,), examples="T4, RTX 20xx, Quadro RTX",
               native_bf16=False, fp16_tensor_cores=True, tf32=False, fp8=False),
    Generation(name="Ampere", majors=(8,), minors=(0, 6, 7), examples="A100 (8.0), A10, A40, RTX 30xx (8.6), "
               "Jetson Orin (8.7)", native_bf16=True, fp16_tensor_cores=True, tf32=True, fp8=False),
    Generation(name="Ada", majors=(8,), minors=(9,), examples="L4, L40, L40S, RTX 40xx",
               native_bf16=True, fp16_tensor_cores=True, tf32=True, fp8=True),
    Generation(name="Hopper", majors=(9,), minors=(0,), examples="H100, H200, GH200",
               native_bf16=True, fp16_tensor_cores=True, tf32=True, fp8=True),
    Generation(name="Blackwell", majors=(10, 11, 12), minors=None, examples="B200, GB200 (10.0), B300 (10.3), "
               "Jetson Thor (11.0), RTX PRO 6000, RTX 50xx (12.0), DGX Spark (12.1)",
               native_bf16=True, fp16_tensor_cores=True, tf32=True, fp8=True),
)
"""Oldest first. Native bf16 from 8.0, fp16 tensor cores from 7.0, tf32 from 8.0, fp8 from 8.9."""


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The training precision and why."""

    precision: str
    """'fp32', 'bf16' or 'fp16'."""
    why: str
    """One sentence for the log (``resolved_settings``)."""

    @property
    def grad_scaler(self) -> bool:
        """fp16 gradients underflow without loss scaling; bf16 and fp32 need none."""
        return self.precision == "fp16"


def capability_text(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def generation(capability: tuple[int, int]) -> Generation:
    """The table's row for ``capability``; one not in the table gets the features of the newest
    generation below it (a future capability those of Blackwell), under its own name."""
    for row in GENERATIONS:
        if row.covers(capability):
            return row
    older = [row for row in GENERATIONS if row.lowest <= tuple(capability)] or [GENERATIONS[0]]
    nearest = older[-1]
    return Generation(name=f"an unlisted GPU generation (features taken from {nearest.name})",
                      majors=(capability[0],), minors=(capability[1],), examples="",
                      native_bf16=nearest.native_bf16, fp16_tensor_cores=nearest.fp16_tensor_cores,
                      tf32=nearest.tf32, fp8=nearest.fp8)


def normalise(requested: str) -> str:
    """'auto', 'fp32', 'bf16' or 'fp16' ('none' is fp32); UnknownPrecision on anything else."""
    try:
        return ALIASES[requested.strip().lower()]
    except KeyError:
        raise UnknownPrecision(f"invalid precision {requested!r}: one of auto, fp32 (none), bf16, fp16") from None


def cpu_bf16_flags(cpuinfo: str) -> tuple[str, ...]:
    """The native-bf16 flags (x86 ``flags``, Arm ``Features``) of the first CPU in a /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in ("flags", "features"):
            present = set(value.split())
            wanted = X86_BF16_FLAGS if key == "flags" else ARM_BF16_FEATURES
            return tuple(flag for flag in wanted if flag in present)
    return ()


def cpu_bf16_native(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU runs bf16 natively (AVX-512 BF16 or AMX, or Arm's BF16); False where
    /proc/cpuinfo cannot be read (not Linux)."""
    try:
        return bool(cpu_bf16_flags(cpuinfo.read_text()))
    except OSError:
        return False


def _on_gpu(wanted: str, capability: tuple[int, int]) -> Choice:
    row = generation(capability)
    device = f"{row.name} (compute capability {capability_text(capability)})"
    if wanted == "bf16" and not row.native_bf16:
        raise UnsupportedPrecision(f"bf16 asked for, but {device} has no native bf16 (compute capability 8.0 "
                                   "or newer has it): use fp16, fp32 or auto")
    if wanted != "auto":
        return Choice(precision=wanted, why=f"{wanted} as asked on {device}")
    if row.native_bf16:
        return Choice(precision="bf16", why=f"bf16 autocast: {device} runs bf16 natively (8.0 and newer)")
    if row.fp16_tensor_cores:
        return Choice(precision="fp16", why=f"fp16 autocast with a GradScaler: {device} has fp16 tensor cores "
                                            "but no native bf16")
    return Choice(precision="fp32", why=f"fp32: {device} has neither fp16 tensor cores nor native bf16")


def _on_cpu(wanted: str, native_bf16: bool) -> Choice:
    if wanted == "auto":
        if native_bf16:
            return Choice(precision="bf16", why="bf16 autocast: this CPU runs bf16 natively (AVX-512 BF16 or AMX)")
        return Choice(precision="fp32", why="fp32: this CPU has no native bf16 (no AVX-512 BF16 or AMX; emulated "
                                            "bf16 is several times slower than fp32)")
    note = " (emulated on this CPU: slower than fp32)" if wanted == "bf16" and not native_bf16 else ""
    return Choice(precision=wanted, why=f"{wanted} as asked on the CPU{note}")


def choose(requested: str, device_kind: str, capability: tuple[int, int] | None = None,
           cpu_native_bf16: bool = False) -> Choice:
    """The training precision for ``requested`` ('auto', a precision or an alias) on a 'cuda' device
    of compute ``capability``, or on the CPU (any other kind) that runs bf16 natively or not.

    Raises UnknownPrecision for a request that is no precision, UnsupportedPrecision for bf16 on a
    GPU without native bf16, ValueError for a CUDA device without its capability."""
    wanted = normalise(requested)
    if device_kind == "cuda":
        if capability is None:
            raise ValueError("a CUDA device needs its compute capability")
        return _on_gpu(wanted, (int(capability[0]), int(capability[1])))
    return _on_cpu(wanted, cpu_native_bf16)
