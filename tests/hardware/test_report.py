"""The HTML report: self-contained, plots that decode, every foreign string escaped; and how it
looks in a real browser (headless Chromium, skipped where it is not installed)."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from orchestrator.insight import sysinfo
from tests.hardware.fake_nvml import FakeNvml
from tests.hardware.stored_runs import make_run

EVIL = "<script>alert('x')</script>"
EVIL_LINE = '<img src=x onerror="alert(1)"> torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB'


class Collect(HTMLParser):
    """Every start tag with its attributes, and all text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("report")
    results = root / "results"
    system = sysinfo.capture(root, nvml=FakeNvml())
    system["host"]["cpu_model"] = EVIL
    make_run(results, label="slow", seeds=list(range(1, 6)), env={"FAKE_EPOCH_MS": "1000"}, power_w=250,
             system=system, run_id="run-slow")
    make_run(results, label=f"fast{EVIL}", seeds=list(range(1, 6)), env={"FAKE_EPOCH_MS": "800"}, power_w=320,
             system=system, run_id="run-fast", extra_output=EVIL_LINE + "\n")
    return results, str(root / "report.html")


def test_report_is_self_contained_with_decodable_plots_and_escaped_strings(hw_cli, report_html) -> None:
    results, out = report_html
    r = hw_cli("report", "run-slow", "run-fast", "--results", str(results), "--out", out)
    assert r.code == 0, r.err
    text = Path(out).read_text()
    parsed = Collect()
    parsed.feed(text)
    tags = [tag for tag, _ in parsed.tags]
    assert "script" not in tags  # the label, CPU model and log line were escaped, not injected
    assert not any(k.startswith("on") for _, attrs in parsed.tags for k in attrs)
    assert not any(tag in ("link", "iframe", "object") for tag in tags)
    images = [attrs["src"] for tag, attrs in parsed.tags if tag == "img"]
    assert [attrs["alt"] for tag, attrs in parsed.tags if tag == "img"] == [
        "Time-to-train per seed, by setup",
        "Convergence versus hardware: epochs-to-target against seconds per epoch",
        "Accuracy versus time since run_start",
        "GPU power over time (all GPUs of a seed summed)",
    ]
    for src in images:
        assert src.startswith("data:image/png;base64,")
        pixels = imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert pixels.shape[0] > 100 and pixels.shape[1] > 300 and float(np.std(pixels)) > 0.01
    body = "".join(parsed.text)
    assert EVIL in body and f"fast{EVIL}" in body  # shown as text
    assert "cuda_out_of_memory: " + EVIL_LINE in body
    assert "NVIDIA A100-SXM4-80GB" in body and "fast" in body and "1.25x" in body


def test_report_without_telemetry_says_why_there_is_no_power_plot(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_run(results, label="only", seeds=[1, 2, 3], run_id="run-only")
    out = tmp_path / "r.html"
    assert hw_cli("report", "run-only", "--results", str(results), "--out", str(out)).code == 0
    text = out.read_text()
    assert "no GPU power to plot: no telemetry was recorded" in text
    assert "this run holds no system capture" in text
    bad = hw_cli("report", "run-only", "--results", str(results), "--out", str(tmp_path))
    assert bad.code == 2 and "is a folder" in bad.err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium(hw_cli, report_html, tmp_path: Path) -> None:
    results, out = report_html
    assert hw_cli("report", "run-slow", "run-fast", "--results", str(results), "--out", out).code == 0
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}", Path(out).as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    # The plots' setup colours (matplotlib blue and red) are on the page: the images rendered.
    for colour in ((0x1F, 0x77, 0xB4), (0xD6, 0x27, 0x28)):
        close = np.all(np.abs(pixels * 255 - np.array(colour)) < 12, axis=-1)
        assert close.sum() > 200, f"colour {colour} not rendered"


def test_cpu_only_telemetry_plots_host_cpu(hw_cli, tmp_path: Path) -> None:
    import json

    from orchestrator.results.store import Store

    results = tmp_path / "results"
    make_run(results, label="cpu", seeds=[1, 2, 3], run_id="run-cpu", power_w=100)
    run = Store(results).open("run-cpu")
    for seed in run.paths.seed_dirs():  # what the sampler writes on a host without a driver
        series = json.loads(seed.telemetry.read_text())
        series["gpus"] = []
        series["gpu_source"] = {"available": False, "reason": "NVIDIA driver not loaded"}
        seed.telemetry.write_text(json.dumps(series))
    out = tmp_path / "r.html"
    assert hw_cli("report", "run-cpu", "--results", str(results), "--out", str(out)).code == 0
    parsed = Collect()
    parsed.feed(out.read_text())
    assert "Host CPU busy over time" in [attrs.get("alt") for tag, attrs in parsed.tags if tag == "img"]
    assert "no GPU power to plot: NVIDIA driver not loaded" in "".join(parsed.text)
