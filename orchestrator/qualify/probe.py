"""The qualification probe: microbenchmarks run where the workload runs, printed as JSON lines.

A standalone script: the standard library, torch, numpy and the workloads' precision rule
(`workloads.common.precision`, importable wherever a workload runs), and nothing of the
orchestrator, so the same text runs as a local process, in the workload's image and on a Slurm
node, and so qualifies that image's torch, CUDA and drivers too. The orchestrator hands it over as source
(`BOOTSTRAP` reads it from ``MLTRAIN_PROBE_SOURCE``), with its settings as JSON in
``MLTRAIN_PROBE_CONFIG``; the one argument is the random seed. Run by hand:

    MLTRAIN_PROBE_CONFIG='{"cpu": {"gemm": {"dtypes": ["fp32"], "dense": [[512, 512, 512]]}}}' \
        python orchestrator/qualify/probe.py 1

Every line it means for the orchestrator starts with ``:::PROBE `` and holds one JSON object:
``{"kind": "device", ...}`` first (what it runs on: every CUDA device with its UUID and PCI bus id,
or why CUDA is unavailable), then per case ``{"kind": "result", "check", "metric", "value", "unit",
"better", "sane", "detail"}``, ``{"kind": "skip", "check", "metric", "reason"}`` for a case this
device cannot run, or ``{"kind": "error", "check", "metric", "error"}`` (an out-of-memory error is
also printed to stderr as PyTorch words it).

On two or more GPUs the largest dense GEMM of each dtype and the device memory copy run on every
GPU, named ``<metric>_gpu<i>`` and carrying ``"gpu": i`` (CUDA's index), so that one slow GPU of
eight is seen; the other cases run on cuda:0.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import warnings

PREFIX = ":::PROBE "


def emit(kind: str, **fields: object) -> None:
    sys.stdout.write(PREFIX + json.dumps({"kind": kind, **fields}, sort_keys=True) + "\n")
    sys.stdout.flush()


BATCH_S = 0.002
"""Calls are timed in batches of at least this long between synchronisations, so that a kernel of
microseconds on a GPU is not measured as its launch and sync latency."""


def timed(run, sync, seconds: float, max_repeats: int, warmup: int = 1) -> list[float]:
    """Seconds per call of ``run`` (after ``warmup`` calls), one entry per batch, batches repeated
    until ``seconds`` have passed (at least 3)."""
    for _ in range(warmup):
        run()
    sync()
    t0 = time.perf_counter()
    run()
    sync()
    batch = max(1, min(1000, int(BATCH_S / max(time.perf_counter() - t0, 1e-9)) + 1))
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < max_repeats and (len(times) < 3 or time.perf_counter() - started < seconds):
        t0 = time.perf_counter()
        for _ in range(batch):
            run()
        sync()
        times.append((time.perf_counter() - t0) / batch)
    return times


class Probe:
    def __init__(self, config: dict, seed: int) -> None:
        import torch

        from workloads.common import precision  # the workloads' rule; importable where they run

        self.torch = torch
        self.precision = precision
        self.seed = seed
        wanted = config.get("device", "auto")
        self.wanted = wanted
        self.cuda = torch.cuda.is_available() and wanted in ("auto", "cuda")
        self.kind = "cuda" if self.cuda else "cpu"
        self.device = torch.device("cuda:0" if self.cuda else "cpu")
        self.gpu_count = torch.cuda.device_count() if self.cuda else 0
        self.settings = config.get(self.kind) or {}
        self.seconds = float(config.get("seconds_per_case", 0.5))
        self.max_repeats = int(config.get("max_repeats", 200))
        threads = config.get("threads")
        if threads:
            torch.set_num_threads(int(threads))
        torch.manual_seed(seed)

    # ------------------------------------------------------------ facts
    def describe(self) -> None:
        torch = self.torch
        facts = {
            "device": self.kind,
            "torch": torch.__version__,
            "cuda_runtime": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if self.cuda else None,
            "threads": torch.get_num_threads(),
            "cpus": len(os.sched_getaffinity(0)),
            "cpu_bf16_native": self.cpu_bf16(),
            "gpu_count": self.gpu_count,
            "seed": self.seed,
        }
        facts.update(cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
                     cuda_device_order=os.environ.get("CUDA_DEVICE_ORDER"))
        if self.cuda:
            props = torch.cuda.get_device_properties(0)
            facts.update(device_name=props.name, capability=f"{props.major}.{props.minor}",
                         device_memory_bytes=props.total_memory,
                         gpus=[self.gpu_facts(i) for i in range(self.gpu_count)])
        else:
            facts.update(device_name=cpu_model(), capability=None, cuda_unavailable=self.cuda_failure())
        emit("device", **facts)

    def gpu_facts(self, index: int) -> dict:
        """What names CUDA device ``index`` for NVML: its UUID and PCI bus id (NVML's format)."""
        props = self.torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        bus = [getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device")]
        return {"index": index, "name": props.name, "uuid": f"GPU-{uuid}" if uuid is not None else None,
                "pci_bus_id": "{:08X}:{:02X}:{:02X}.0".format(*bus) if None not in bus else None,
                "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}"}

    def cuda_failure(self) -> str:
        """Why this probe runs on the CPU: told so, or what CUDA says when asked to start."""
        torch = self.torch
        if self.wanted == "cpu":
            return "the probe was told to run on the CPU"
        if torch.version.cuda is None:
            return f"torch {torch.__version__} has no CUDA (Torch not compiled with CUDA enabled)"
        try:
            torch.cuda.init()
        except Exception as exc:  # noqa: BLE001 - CUDA's reason, whatever its type, is the fact reported
            return f"{type(exc).__name__}: {one_line(exc)}"
        return f"torch.cuda.is_available() is False (CUDA sees {torch.cuda.device_count()} devices)"

    def cpu_bf16(self) -> bool:
        """Native bf16 on this CPU, by the workloads' own rule (the CPU's flags)."""
        return self.precision.cpu_bf16_native()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def on(self, gpu: int | None):
        """The device of a case: CUDA device ``gpu`` (None: cuda:0, or the CPU)."""
        return self.torch.device(f"cuda:{gpu}") if self.cuda and gpu is not None else self.device

    def sync_on(self, gpu: int | None):
        """What waits for a case's kernels on its device."""
        if gpu is None or not self.cuda:
            return self.sync
        return lambda: self.torch.cuda.synchronize(gpu)

    def placements(self, per_gpu: bool) -> list[int | None]:
        """Where a case runs: on each GPU of two or more when it is a per-GPU case, else once (None)."""
        return list(range(self.gpu_count)) if per_gpu and self.gpu_count > 1 else [None]

    def dtype(self, name: str):
        """(torch dtype, None) or (None, why this device cannot run it natively): the workloads'
        precision rule (`workloads.common.precision`), whose table of GPU generations says what runs
        natively. ``torch.cuda.is_bf16_supported()`` is not asked: it counts emulation (V100, T4)."""
        torch = self.torch
        if name == "fp32":
            return torch.float32, None
        if not self.cuda:
            if name == "bf16" and self.cpu_bf16():
                return torch.bfloat16, None
            why = {"tf32": "TF32 is a CUDA tensor-core mode; this is a CPU",
                   "bf16": "no native bf16 on this CPU (no AVX-512 BF16 or AMX flag; it would be emulated)",
                   "fp16": "no native fp16 matrix multiply on CPU"}
            return None, why.get(name, f"unknown dtype {name!r}")
        capability = tuple(torch.cuda.get_device_capability(0))
        generation = self.precision.generation(capability)
        native = {"tf32": (generation.tf32, torch.float32), "bf16": (generation.native_bf16, torch.bfloat16),
                  "fp16": (generation.fp16_tensor_cores, torch.float16)}
        if name not in native:
            return None, f"unknown dtype {name!r}"
        supported, dtype = native[name]
        if not supported:
            return None, (f"no native {name} on {generation.name} (compute capability"
                          f" {self.precision.capability_text(capability)}); it would be emulated")
        return dtype, None

    def run_case(self, check: str, metric: str, body) -> None:
        torch = self.torch
        try:
            body()
        except out_of_memory_error(torch) as exc:  # printed as PyTorch words it, for the classifier
            sys.stderr.write(f"torch.OutOfMemoryError: {exc}\n")
            emit("error", check=check, metric=metric, error=f"torch.OutOfMemoryError: {one_line(exc)}")
            self.free()
        except (RuntimeError, ValueError, OSError) as exc:
            emit("error", check=check, metric=metric, error=f"{type(exc).__name__}: {one_line(exc)}")
            self.free()

    def free(self) -> None:
        if self.cuda:
            self.torch.cuda.empty_cache()

    # ------------------------------------------------------------ GEMM
    def gemm(self) -> None:
        spec = self.settings.get("gemm")
        if not spec:
            return
        dense = [tuple(shape) for shape in spec.get("dense", [])]
        largest = max(dense, key=lambda s: s[0] * s[1] * s[2], default=None)  # per GPU: the one near peak
        for name in spec.get("dtypes", ["fp32"]):
            dtype, why = self.dtype(name)
            for m, n, k in dense:
                metric = f"gemm_{name}_{m}x{n}x{k}"
                if dtype is None:
                    emit("skip", check="gemm", metric=metric, reason=why)
                    continue
                for gpu in self.placements((m, n, k) == largest):
                    named = metric if gpu is None else f"{metric}_gpu{gpu}"
                    self.run_case("gemm", named, lambda m=m, n=n, k=k, d=dtype, t=name, mt=named, g=gpu:
                                  self.dense(mt, t, d, m, n, k, gpu=g))
        for m, n, k, sparsity in spec.get("sparse", []):  # fp32 CSR: the one sparse kernel every device has
            metric = f"spmm_fp32_{m}x{n}x{k}_s{sparsity:g}"
            self.run_case("gemm", metric, lambda m=m, n=n, k=k, s=sparsity, mt=metric: self.sparse(mt, m, n, k, s))

    def dense(self, metric: str, name: str, dtype, m: int, n: int, k: int, gpu: int | None = None) -> None:
        torch = self.torch
        device = self.on(gpu)
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        previous = torch.backends.cuda.matmul.allow_tf32 if self.cuda else None
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        try:
            out = torch.mm(a, b)
            times = timed(lambda: torch.mm(a, b, out=out), self.sync_on(gpu), self.seconds, self.max_repeats)
            sane, detail = self.check_product(a, b, out, name)
        finally:
            if self.cuda:
                torch.backends.cuda.matmul.allow_tf32 = previous
        median = statistics.median(times)
        emit("result", check="gemm", metric=metric, value=2.0 * m * n * k / median / 1e12, unit="TFLOP/s",
             better="higher", sane=sane, detail=f"{detail}; median of {len(times)} calls {median * 1e3:.3g} ms"
             + (f"; on {device}" if gpu is not None else ""), **({"gpu": gpu} if gpu is not None else {}))

    def check_product(self, a, b, out, name: str) -> tuple[bool, str]:
        """Compare 8 rows of the product with float64: silent data corruption fails here."""
        torch = self.torch
        rows = min(8, a.shape[0])
        expect = a[:rows].double().cpu() @ b.double().cpu()
        got = out[:rows].double().cpu()
        scale = expect.abs().max().item() or 1.0
        error = (got - expect).abs().max().item() / scale
        tolerance = {"fp32": 1e-4, "tf32": 2e-2, "bf16": 5e-2, "fp16": 2e-2}.get(name, 1e-2)
        ok = bool(torch.isfinite(got).all().item()) and error <= tolerance
        return ok, f"max relative error {error:.2g} (tolerance {tolerance:g})"

    def sparse(self, metric: str, m: int, n: int, k: int, sparsity: float) -> None:
        torch = self.torch
        generator = torch.Generator().manual_seed(self.seed)
        dense = torch.randn(m, k, generator=generator)
        dense[torch.rand(m, k, generator=generator) < sparsity] = 0.0
        nnz = int((dense != 0).sum().item())
        a = dense.to_sparse_csr().to(self.device)
        b = torch.randn(k, n, device=self.device)
        out = a @ b
        times = timed(lambda: a @ b, self.sync, self.seconds, self.max_repeats)
        rows = min(8, m)
        expect = dense[:rows].double() @ b.double().cpu()
        error = (out[:rows].double().cpu() - expect).abs().max().item() / (expect.abs().max().item() or 1.0)
        median = statistics.median(times)
        emit("result", check="gemm", metric=metric, value=2.0 * nnz * n / median / 1e9, unit="GFLOP/s",
             better="higher", sane=error <= 1e-4,
             detail=f"{nnz} non-zeros; max relative error {error:.2g}; median of {len(times)} calls"
                    f" {median * 1e3:.3g} ms")

    # ------------------------------------------------------------ convolution
    def conv(self) -> None:
        spec = self.settings.get("conv")
        if not spec:
            return
        torch = self.torch
        if self.cuda:
            torch.backends.cudnn.benchmark = True
        for name in spec.get("dtypes", ["fp32"]):
            dtype, why = self.dtype(name)
            for shape in spec.get("conv2d", []):
                self.one_conv(2, name, dtype, why, shape)
            for shape in spec.get("conv3d", []):
                self.one_conv(3, name, dtype, why, shape)

    def one_conv(self, dims: int, name: str, dtype, why: str | None, shape: list[int]) -> None:
        """``shape``: N, C, spatial size, K (output channels), kernel size, stride, padding."""
        n, c, size, k, kernel, stride, pad = shape
        metric = f"conv{dims}d_{name}_n{n}c{c}s{size}k{k}r{kernel}u{stride}"
        if dtype is None:
            emit("skip", check="conv", metric=metric, reason=why)
            return

        def body() -> None:
            torch = self.torch
            layer_cls = torch.nn.Conv2d if dims == 2 else torch.nn.Conv3d
            layer = layer_cls(c, k, kernel, stride=stride, padding=pad, bias=False).to(self.device, dtype)
            x = torch.randn(n, c, *([size] * dims), device=self.device, dtype=dtype)
            previous = torch.backends.cudnn.allow_tf32 if self.cuda else None
            if self.cuda:
                torch.backends.cudnn.allow_tf32 = name == "tf32"
            try:
                with torch.no_grad():
                    out = layer(x)
                    times = timed(lambda: layer(x), self.sync, self.seconds, self.max_repeats)
                sane = bool(torch.isfinite(out).all().item())
            finally:
                if self.cuda:
                    torch.backends.cudnn.allow_tf32 = previous
            flops = 2.0 * out.numel() * c * kernel ** dims
            median = statistics.median(times)
            emit("result", check="conv", metric=metric, value=flops / median / 1e12, unit="TFLOP/s", better="higher",
                 sane=sane, detail=f"output {tuple(out.shape)}; median of {len(times)} calls {median * 1e3:.3g} ms")

        self.run_case("conv", metric, body)

    # ------------------------------------------------------------ memory
    def memory(self) -> None:
        spec = self.settings.get("memory")
        if not spec:
            return
        torch = self.torch
        host_mb = int(spec.get("host_mb", 256))
        self.run_case("memory", "host_copy_GBps", lambda: self.copy_rate(
            "host_copy_GBps", torch.empty(host_mb << 20, dtype=torch.uint8), "host memory copy (read + write)"))
        if not self.cuda:
            for metric in ("device_copy_GBps", "h2d_pinned_GBps", "d2h_pinned_GBps"):
                emit("skip", check="memory", metric=metric, reason="no CUDA device: host memory is the device memory")
            return
        device_mb = int(spec.get("device_mb", 1024))
        for gpu in self.placements(True):
            metric = "device_copy_GBps" if gpu is None else f"device_copy_GBps_gpu{gpu}"
            self.run_case("memory", metric, lambda mt=metric, g=gpu: self.device_copy(mt, device_mb, g))
        copy_mb = int(spec.get("copy_mb", 256))
        self.run_case("memory", "h2d_pinned_GBps", lambda: self.transfer("h2d_pinned_GBps", copy_mb, True))
        self.run_case("memory", "d2h_pinned_GBps", lambda: self.transfer("d2h_pinned_GBps", copy_mb, False))

    def device_copy(self, metric: str, mb: int, gpu: int | None) -> None:
        """Device memory bandwidth of one GPU (None: cuda:0)."""
        source = self.torch.empty(mb << 20, dtype=self.torch.uint8, device=self.on(gpu))
        what = "device memory copy (read + write)" + (f" on {self.on(gpu)}" if gpu is not None else "")
        self.copy_rate(metric, source, what, gpu)

    def copy_rate(self, metric: str, source, what: str, gpu: int | None = None) -> None:
        source.random_(0, 255)
        target = source.clone()
        times = timed(lambda: target.copy_(source), self.sync_on(gpu), self.seconds, self.max_repeats)
        sane = bool(self.torch.equal(target, source))
        median = statistics.median(times)
        emit("result", check="memory", metric=metric, value=2 * source.numel() / median / 1e9, unit="GB/s",
             better="higher", sane=sane, detail=f"{what}, {source.numel() >> 20} MiB, median {median * 1e3:.3g} ms",
             **({"gpu": gpu} if gpu is not None else {}))

    def transfer(self, metric: str, mb: int, to_device: bool) -> None:
        torch = self.torch
        host = torch.empty(mb << 20, dtype=torch.uint8).pin_memory()
        host.random_(0, 255)
        device = torch.empty(mb << 20, dtype=torch.uint8, device=self.device)
        if to_device:
            times = timed(lambda: device.copy_(host, non_blocking=True), self.sync, self.seconds, self.max_repeats)
            sane = bool(torch.equal(device.cpu(), host))
        else:
            device.random_(0, 255)
            times = timed(lambda: host.copy_(device, non_blocking=True), self.sync, self.seconds, self.max_repeats)
            sane = bool(torch.equal(device.cpu(), host))
        median = statistics.median(times)
        way = "host to device" if to_device else "device to host"
        emit("result", check="memory", metric=metric, value=host.numel() / median / 1e9, unit="GB/s",
             better="higher", sane=sane, detail=f"pinned {way}, {mb} MiB, median {median * 1e3:.3g} ms")

    # ------------------------------------------------------------ storage
    def storage(self) -> None:
        spec = self.settings.get("storage")
        if spec is None:
            return
        folder = os.environ.get("DATADIR", "")
        files = dataset_files(folder, int(spec.get("max_mb", 512)) << 20) if folder else []
        if not files:
            emit("skip", check="storage", metric="storage_read_MBps",
                 reason="no dataset files to read: give the dataset's folder with --data")
            return
        self.run_case("storage", "storage_read_MBps", lambda: self.read_files(files))

    def read_files(self, files: list[str]) -> None:
        evicted = all(evict(path) for path in files)
        total = 0
        started = time.perf_counter()
        for path in files:
            with open(path, "rb", buffering=0) as handle:
                while chunk := handle.read(4 << 20):
                    total += len(chunk)
        elapsed = time.perf_counter() - started
        cache = ("page cache evicted first (posix_fadvise)" if evicted
                 else "page cache NOT evicted: may read from memory")
        emit("result", check="storage", metric="storage_read_MBps", value=total / elapsed / 1e6, unit="MB/s",
             better="higher", sane=total > 0, detail=f"{len(files)} files, {total >> 20} MiB; {cache}")

    # ------------------------------------------------------------ NCCL
    def nccl(self) -> None:
        spec = self.settings.get("nccl")
        if spec is None:
            return
        torch = self.torch
        count = self.gpu_count
        if count < 2:
            emit("skip", check="nccl", metric="allreduce_busbw_GBps",
                 reason=f"all-reduce needs two or more GPUs; CUDA sees {count} here")
            return

        def body() -> None:
            import torch.cuda.nccl as nccl

            elements = (int(spec.get("mb", 256)) << 20) // 4
            tensors = [torch.ones(elements, device=f"cuda:{i}") for i in range(count)]

            def all_reduce() -> None:
                nccl.all_reduce(tensors)

            def sync_all() -> None:
                for i in range(count):
                    torch.cuda.synchronize(i)

            for t in tensors:
                t.fill_(1.0)
            all_reduce()
            sync_all()
            sane = all(float(t[0].item()) == count for t in tensors)
            times = timed(all_reduce, sync_all, self.seconds, self.max_repeats)
            median = statistics.median(times)
            algbw = elements * 4 / median / 1e9
            emit("result", check="nccl", metric="allreduce_busbw_GBps", value=algbw * 2 * (count - 1) / count,
                 unit="GB/s", better="higher", sane=sane,
                 detail=f"{count} GPUs, {elements * 4 >> 20} MiB fp32, bus bandwidth as nccl-tests defines it")

        self.run_case("nccl", "allreduce_busbw_GBps", body)


def dataset_files(folder: str, budget: int) -> list[str]:
    """Regular files under ``folder``, sorted, until ``budget`` bytes."""
    picked: list[str] = []
    total = 0
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not name.startswith("."):
                picked.append(path)
                total += os.path.getsize(path)
                if total >= budget:
                    return picked
    return picked


def evict(path: str) -> bool:
    """Ask the kernel to drop a file's cached pages (no root needed); False where it cannot."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def out_of_memory_error(torch) -> type[BaseException]:
    """The class PyTorch raises when a device runs out of memory: ``torch.OutOfMemoryError`` from
    torch 2.4, ``torch.cuda.OutOfMemoryError`` before (NGC 24.04 ships torch 2.3)."""
    found = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return found if isinstance(found, type) else RuntimeError


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400]


def main(argv: list[str]) -> int:
    try:
        config = json.loads(os.environ.get("MLTRAIN_PROBE_CONFIG", "{}"))
        seed = int(argv[1]) if len(argv) > 1 else 0
    except ValueError as exc:
        sys.stderr.write(f"error: probe settings: {exc}\n")
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.stderr.write("error: torch is not installed where the probe runs\n")
        return 3
    try:
        import workloads.common.precision  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(f"error: the probe needs workloads.common.precision where it runs ({exc}): run it from the"
                         " project, or rebuild the workload's image\n")
        return 3
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    probe = Probe(config, seed)
    probe.describe()
    for step in config.get("order", ["gemm", "conv", "memory", "storage", "nccl"]):
        started = time.perf_counter()
        getattr(probe, step)()
        emit("timing", check=step, seconds=time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
