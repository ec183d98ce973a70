"""System capture: host from /proc and /sys, GPUs through NVML (a recorded trace), storage kind,
the MLCommons system description and the `sysinfo` command."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrator.commands import sysinfo as sysinfo_command
from orchestrator.errors import UsageError
from orchestrator.insight import sysinfo
from orchestrator.insight.gpus import gpu_info
from orchestrator.insight.unavailable import is_unavailable
from orchestrator.mlperf import benchmarks, system_desc
from tests.hardware.fake_nvml import FakeNvml, node_trace

CPUINFO = """processor\t: 0
physical id\t: 0
core id\t: 0
model name\t: AMD EPYC 7763 64-Core Processor
cpu MHz\t\t: 2445.404
flags\t\t: fpu avx2 avx512f

processor\t: 1
physical id\t: 0
core id\t: 0
model name\t: AMD EPYC 7763 64-Core Processor

processor\t: 2
physical id\t: 1
core id\t: 0
model name\t: AMD EPYC 7763 64-Core Processor

processor\t: 3
physical id\t: 1
core id\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
"""


def fake_host(root: Path) -> sysinfo.HostRoots:
    proc, sys_, etc = root / "proc", root / "sys", root / "etc"
    for folder in (proc / "self", sys_, etc):
        folder.mkdir(parents=True)
    (proc / "cpuinfo").write_text(CPUINFO)
    (proc / "meminfo").write_text("MemTotal:       1056768000 kB\nMemAvailable:  900000000 kB\n")
    (etc / "os-release").write_text('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    cache = sys_ / "devices/system/cpu/cpu0/cache/index0"
    cache.mkdir(parents=True)
    (cache / "level").write_text("1\n")
    (cache / "type").write_text("Data\n")
    (cache / "size").write_text("32K\n")
    return sysinfo.HostRoots(proc=proc, sys=sys_, etc=etc)


def test_host_facts_come_from_proc(tmp_path: Path) -> None:
    host = sysinfo.host_info(fake_host(tmp_path))
    assert host["cpu_model"] == "AMD EPYC 7763 64-Core Processor"
    assert (host["sockets"], host["cores"], host["threads"]) == (2, 3, 4)
    assert host["memory_bytes"] == 1056768000 * 1024
    assert host["os"] == "Ubuntu 22.04.4 LTS"
    assert host["caches"] == ["L1d 32K"]
    assert host["cpu_max_mhz"] == pytest.approx(2445.404)
    assert host["cpu_flags"] == ["avx2", "avx512f"]


def test_unreadable_host_facts_say_so(tmp_path: Path) -> None:
    roots = sysinfo.HostRoots(proc=tmp_path / "none", sys=tmp_path / "none", etc=tmp_path / "none")
    host = sysinfo.host_info(roots)
    for key in ("cpu_model", "sockets", "cores", "memory_bytes", "os", "caches", "cpu_max_mhz"):
        assert is_unavailable(host[key]), key


def test_this_host_is_described() -> None:
    host = sysinfo.host_info()
    assert isinstance(host["cpu_model"], str) and host["threads"] >= 1
    assert host["memory_bytes"] > 2**28


def test_gpus_through_nvml_from_a_recorded_trace() -> None:
    nvml = FakeNvml()
    gpus = gpu_info(nvml)
    assert gpus["available"] is True and gpus["count"] == 2
    assert gpus["driver_version"] == "535.104.05" and gpus["cuda_driver_version"] == "12.2"
    first = gpus["devices"][0]
    assert first["name"] == "NVIDIA A100-SXM4-80GB"
    assert first["memory_bytes"] == 85899345920 and first["power_limit_w"] == 400.0
    assert first["max_clocks_mhz"] == {"sm": 1410, "memory": 1593}
    assert first["pcie"] == {"max_generation": 4, "max_width": 16, "current_generation": 4, "current_width": 16}
    assert first["nvlink_active_links"] == 12
    assert first["ecc"] == {"enabled": True, "pending": True}
    assert first["mig"] == {"enabled": False, "pending": False}
    assert first["compute_capability"] == "8.0"
    assert gpus["devices"][1]["mig"] == {"available": False, "reason": "not supported by this GPU or driver"}
    assert nvml.initialised == 0  # shut down again


def test_gpu_section_without_driver_says_so_and_has_no_zeros() -> None:
    gpus = gpu_info(FakeNvml(missing_library=True))
    assert gpus == {"available": False, "reason": "NVIDIA driver not loaded (libnvidia-ml.so not found)"}


@pytest.mark.parametrize("at", ["handle", "queries"])
@pytest.mark.parametrize(("error", "words"), [
    ("GpuIsLost", "GPU is lost (fell off the bus or lost power: Xid 79)"),
    ("NoPermission", "no permission to read this GPU"),
])
def test_an_inaccessible_gpu_is_one_unavailable_entry_not_a_traceback(at: str, error: str, words: str) -> None:
    """Issue 18: nvmlDeviceGetHandleByIndex raises for a GPU outside a Slurm device cgroup or one that fell
    off the bus (or every query on its handle does): the device says unavailable and why, the others stand."""
    trace = node_trace(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"], faults={1: {"error": error, "at": at}})
    gpus = gpu_info(FakeNvml(trace))
    assert gpus["available"] is True and gpus["count"] == 2
    healthy, lost = gpus["devices"]
    assert healthy["name"] == "NVIDIA H100 80GB HBM3" and healthy["pci_bus_id"] == "00000000:18:00.0"
    assert lost["index"] == 1 and lost["available"] is False and lost["reason"].startswith(words), lost
    assert set(lost) == {"index", "available", "reason"}  # every query on it fails: no name, no slot


def test_mig_mode_is_reported_per_gpu() -> None:
    gpus = gpu_info(FakeNvml(node_trace(["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"], mig=(1,))))
    assert [d["mig"] for d in gpus["devices"]] == [{"enabled": False, "pending": False},
                                                   {"enabled": True, "pending": True}]


def test_gpu_section_on_this_machine() -> None:
    gpus = gpu_info()
    if gpus.get("available"):
        pytest.skip("this machine has an NVIDIA driver")
    assert "driver" in gpus["reason"] or "not installed" in gpus["reason"]


def storage_tree(tmp_path: Path, fstype: str, source: str, device_number: str, device: str | None,
                 rotational: str = "0") -> tuple[Path, sysinfo.HostRoots]:
    roots = fake_host(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (roots.proc / "self/mountinfo").write_text(
        f"22 1 {device_number} / {tmp_path} rw,relatime - {fstype} {source} rw\n"
        f"1 0 254:0 / / rw - ext4 /dev/vda rw\n"
    )
    if device is not None:
        disk = roots.sys / "devices/pci0000:00" / device
        (disk / "queue").mkdir(parents=True)
        (disk / "queue/rotational").write_text(rotational + "\n")
        (roots.sys / "dev/block").mkdir(parents=True)
        (roots.sys / "dev/block" / device_number).symlink_to(disk)
        (roots.sys / "block").mkdir()
        (roots.sys / "block" / device).symlink_to(disk)
    return data, roots


@pytest.mark.parametrize(
    ("fstype", "source", "device", "rotational", "kind"),
    [
        ("ext4", "/dev/nvme0n1", "nvme0n1", "0", "nvme"),
        ("xfs", "/dev/sdb", "sdb", "0", "ssd"),
        ("xfs", "/dev/sdc", "sdc", "1", "hdd"),
        ("nfs4", "filer:/export/data", None, "0", "network"),
        ("tmpfs", "tmpfs", None, "0", "memory"),
    ],
)
def test_storage_kind(tmp_path: Path, fstype: str, source: str, device: str | None, rotational: str,
                      kind: str) -> None:
    data, roots = storage_tree(tmp_path, fstype, source, "259:3", device, rotational)
    info = sysinfo.storage_info(data, roots)
    assert info["kind"] == kind
    assert info["filesystem"] == fstype and info["mount_point"] == str(tmp_path)
    assert info["capacity_bytes"] > 0
    if device:
        assert info["device"] == device
    else:
        assert is_unavailable(info["device"])


def test_storage_whose_device_is_hidden_says_so(tmp_path: Path) -> None:
    data, roots = storage_tree(tmp_path, "overlay", "overlay", "0:52", None)
    info = sysinfo.storage_info(data, roots)
    assert is_unavailable(info["kind"]) and "not visible" in info["kind"]["reason"]


def test_storage_of_a_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert sysinfo.storage_info(missing) == {"available": False, "reason": f"{missing} does not exist"}


def test_engine_unreachable_says_why() -> None:
    def broken() -> object:
        raise OSError("connection refused")

    engine = sysinfo.engine_info(broken)
    assert engine["available"] is False and engine["reason"]


class Client:
    """The Docker SDK's client as `engine_info` uses it: its connection is closed when it is done."""

    def __init__(self, *, fails: bool = False) -> None:
        self.fails, self.closed = fails, False

    def version(self) -> dict:
        if self.fails:
            raise OSError("the engine hung up")
        return {"Version": "26.1.0", "ApiVersion": "1.45", "Components": [{"Name": "Engine", "Version": "26.1.0"}]}

    def info(self) -> dict:
        return {"Runtimes": {"runc": {}, "nvidia": {}}, "DefaultRuntime": "runc"}

    def close(self) -> None:
        self.closed = True


def test_engine_version_and_runtimes() -> None:
    client = Client()
    engine = sysinfo.engine_info(lambda: client)
    assert engine == {"available": True, "product": "docker", "version": "26.1.0", "api_version": "1.45",
                      "runtimes": ["nvidia", "runc"], "default_runtime": "runc"}
    assert client.closed  # its socket was left open until the process ended (a ResourceWarning in every run)
    failing = Client(fails=True)
    assert sysinfo.engine_info(lambda: failing)["available"] is False and failing.closed


def captured_with_gpus(tmp_path: Path) -> dict:
    return sysinfo.capture(tmp_path, nvml=FakeNvml(), engine_client_factory=lambda: (_ for _ in ()).throw(OSError("x")))


@pytest.mark.parametrize("ruleset", ["4.0.0", benchmarks.latest_ruleset()])
@pytest.mark.parametrize("with_gpus", [True, False])
def test_system_description_passes_the_mlcommons_checker(tmp_path: Path, with_gpus: bool, ruleset: str) -> None:
    """Under the last round of unet3d and resnet, and under the newest (`mltrain sysinfo --system-desc`)."""
    system = captured_with_gpus(tmp_path) if with_gpus else sysinfo.capture(
        tmp_path, nvml=FakeNvml(missing_library=True))
    name = system_desc.default_system_name(system)
    assert name.endswith("2xNVIDIA_A100-SXM4-80GB" if with_gpus else "_cpu")
    description = system_desc.system_description(system, submitter="mltrain", system_name=name)
    path = tmp_path / "systems" / f"{name}.json"
    system_desc.write_system_description(path, description)
    valid, log = system_desc.check_system_description(path, ruleset)
    assert valid, log
    assert description["accelerators_per_node"] == ("2" if with_gpus else "0")
    if with_gpus:
        assert description["accelerator_model_name"] == "NVIDIA A100-SXM4-80GB"
        assert description["accelerator_host_interconnect"] == "PCIe Gen4 x16"
        assert description["accelerator_interconnect"] == "NVLink, 12 active links"
        assert "NVIDIA driver 535.104.05, CUDA 12.2" in description["other_software_stack"]


def test_checker_rejects_an_incomplete_description(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"submitter": "x", "system_name": "y", "status": "Available cloud"}))
    valid, log = system_desc.check_system_description(path, benchmarks.latest_ruleset())
    assert not valid and "Missing field" in log


def test_the_checker_prints_nothing_through_a_handler_the_process_already_has(tmp_path: Path) -> None:
    """Its log lines went to every handler of the root logger, a stderr one included: the checker is
    run as every mlperf_logging tool is (`checkers.quiet_tools`), its lines collected only."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"submitter": "x", "system_name": "y", "status": "Available cloud"}))
    printed = io.StringIO()
    handler = logging.StreamHandler(printed)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        valid, log = system_desc.check_system_description(path, benchmarks.latest_ruleset())
    finally:
        root.removeHandler(handler)
    assert not valid and "Missing field" in log
    assert printed.getvalue() == ""


def test_system_description_rejects_bad_status() -> None:
    with pytest.raises(UsageError, match="status"):
        system_desc.system_description({}, submitter="a", system_name="b", status="cloud")


def test_sysinfo_command_json_and_system_description(tmp_path: Path) -> None:
    app = typer.Typer()
    sysinfo_command.register(app)
    app.command("noop")(lambda: None)  # keep `sysinfo` a subcommand
    result = CliRunner().invoke(app, ["sysinfo", "--json", "--data", str(tmp_path), "--system-desc",
                                      str(tmp_path / "systems"), "--system-name", "my box"])
    assert result.exit_code == 0, result.output
    system = json.loads(result.stdout)
    assert set(system) == {"host", "gpus", "storage", "container_engine", "software"}
    assert system["storage"]["path"] == str(tmp_path.resolve())
    written = tmp_path / "systems" / "my_box.json"
    assert json.loads(written.read_text())["system_name"] == "my_box"
    assert [p.name for p in written.parent.iterdir()] == ["my_box.json"]  # no temp file left


def test_sysinfo_command_text_mentions_missing_gpu() -> None:
    app = typer.Typer()
    sysinfo_command.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["sysinfo"])
    assert result.exit_code == 0
    assert "host:" in result.stdout and "cpu_model:" in result.stdout
    if not gpu_info().get("available"):
        assert "gpus:\n  unavailable: " in result.stdout
