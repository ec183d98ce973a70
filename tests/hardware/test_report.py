"""The HTML report: self-contained, plots that decode, every foreign string escaped; and how it
looks in a real browser (headless Chromium, skipped where it is not installed)."""

from __future__ import annotations

import base64
import html
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from matplotlib.image import imread

from orchestrator.insight import sysinfo
from tests.hardware.fake_nvml import FakeNvml
from tests.hardware.stored_runs import make_run

SVG_NS = "{http://www.w3.org/2000/svg}"

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
    for src in images:  # SVG: crisp at any zoom, and drawn in a fraction of a PNG's time
        assert src.startswith("data:image/svg+xml;base64,")
        svg = ElementTree.fromstring(base64.b64decode(src.split(",", 1)[1]))
        assert svg.tag == "{http://www.w3.org/2000/svg}svg" and float(svg.get("width", "0").removesuffix("pt")) > 300
        elements = list(svg.iter())
        assert not any(e.tag.endswith(("script", "foreignObject")) or any(k.startswith("on") for k in e.attrib)
                       for e in elements)  # an image of text and paths, nothing that runs
        assert sum(e.tag.endswith(("path", "line", "circle", "rect")) for e in elements) > 10
        assert any(e.tag.endswith("text") for e in elements)
    legend = "".join(base64.b64decode(src.split(",", 1)[1]).decode() for src in images)
    assert html.escape(f"fast{EVIL}", quote=False) in legend  # a label is the SVG's text, escaped
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
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
VERDICT_BADGES = {"VALID": (0x1A, 0x7F, 0x37), "disturbed": (0xBC, 0x4C, 0x00)}
PLOT_COLOURS = ((0x1F, 0x77, 0xB4), (0xD6, 0x27, 0x28))
"""matplotlib's blue and red: the setups' colours in the plots."""
MEASURE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" style="border:0;width:{width}px;height:3000px" srcdoc="{page}"></iframe>
<script>
document.getElementById('page').addEventListener('load', () => {{
  const doc = document.getElementById('page').contentDocument, view = doc.defaultView;
  const top = (el) => el ? el.getBoundingClientRect().top + view.scrollY : null;
  const ids = [...doc.querySelectorAll('.id')];
  const measured = {{width: view.innerWidth, scroll: doc.documentElement.scrollWidth,
    sections: [...doc.querySelectorAll('h2')].map(h => [h.textContent, top(h)]),
    badges: [...doc.querySelectorAll('#verdict .badge')].map(b => [b.textContent, top(b)]),
    image: top(doc.querySelector('img')), image_width: doc.querySelector('img').getBoundingClientRect().width,
    ids_on_one_line: ids.every(el => new Set([...el.getClientRects()].map(r => Math.round(r.top))).size === 1),
    ids_right: Math.max(...ids.map(el => el.getBoundingClientRect().right)),
    speedup_right: Math.max(...[...doc.querySelectorAll('td[data-label="speedup"]')].map(
      el => el.getBoundingClientRect().right)),
    image_scale: Math.min(...[...doc.querySelectorAll('img')].map(
      el => el.getBoundingClientRect().width / el.naturalWidth))}};
  const out = document.createElement('pre'); out.id = 'measured'; out.textContent = JSON.stringify(measured);
  document.body.appendChild(out);
}});
</script></body></html>"""


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def _measured(page: str, width: int, tmp_path: Path) -> dict:
    """Where the report's parts land when it is laid out ``width`` pixels wide (in a frame of that width:
    headless Chromium's window is never narrower than 500 px)."""
    import json
    import re

    wrapper = tmp_path / f"measure-{width}.html"
    wrapper.write_text(MEASURE.format(width=width, page=html.escape(page, quote=True)))
    done = _chromium(["--window-size=1500,1000", "--dump-dom", wrapper.as_uri()], tmp_path)
    found = re.search(r'<pre id="measured">([^<]*)</pre>', done.stdout)
    assert found, done.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_report_leads_with_its_verdict_in_headless_chromium(hw_cli, tmp_path: Path, width: int) -> None:
    """Screenshots at a desktop's 1400 px and a phone's 390 px: the top of the page (1,200 px) is the
    verdict (each setup's VALID and host badges), not the plots; the page never scrolls sideways, plots
    take its width; run ids and the speedup are on the screen (a phone: the comparison a card per setup,
    an id broken after a hyphen), and a phone's plots are drawn for it (labels readable, not 5 px)."""
    results = tmp_path / "results"
    system = sysinfo.capture(tmp_path, nvml=FakeNvml())
    make_run(results, label="alone", seeds=list(range(1, 6)), env={"FAKE_EPOCH_MS": "1000"}, power_w=250,
             system=system, run_id="fakebench-qualify-20261127-101500-a1b2", other_cpu_pct=1.0)
    make_run(results, label="beside-a-hog", seeds=list(range(1, 6)), env={"FAKE_EPOCH_MS": "800"}, power_w=320,
             system=system, run_id="fakebench-qualify-20261127-103000-c3d4", other_cpu_pct=45.0)
    out = tmp_path / "report.html"
    assert hw_cli("report", "--label", "alone", "--label", "beside-a-hog", "--results", str(results),
                  "--out", str(out)).code == 0
    shot = tmp_path / f"report-{width}.png"
    done = _chromium([f"--window-size={width},1200", f"--screenshot={shot}", out.as_uri()], tmp_path)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = imread(shot)[..., :3] * 255
    assert pixels.shape[1] == width

    def seen(colour: tuple[int, int, int]) -> int:
        return int(np.all(np.abs(pixels - np.array(colour)) < 12, axis=-1).sum())

    for word, colour in VERDICT_BADGES.items():
        assert seen(colour) > 100, f"the {word} badge is not on the first screen"
    assert all(seen(colour) < 50 for colour in PLOT_COLOURS), "a plot is on the first screen, before the verdict"

    layout = _measured(out.read_text(), width, tmp_path)
    assert layout["width"] == width and layout["scroll"] <= width, layout  # nothing makes the page scroll sideways
    sections = [name for name, _ in layout["sections"]]
    assert sections[:3] == ["Verdict", "What differs between the setups", "Comparison"], sections
    assert [word for word, _ in layout["badges"]] == ["VALID", "quiet", "VALID", "disturbed"]
    plots_at = dict(layout["sections"])["Plots"]
    assert all(at < plots_at for _, at in layout["badges"]) and layout["image"] > plots_at
    assert layout["image_width"] > 0.9 * (width - 60)  # a plot uses the page's width (less its margins)
    assert layout["ids_right"] <= width and layout["speedup_right"] <= width, layout  # nothing off-screen
    assert layout["ids_on_one_line"] or width < 700  # a phone breaks a run id after a hyphen, not off-screen
    assert layout["image_scale"] >= 0.5, layout  # a phone gets the narrow plot: its labels stay readable


def test_cpu_only_telemetry_plots_host_cpu(hw_cli, tmp_path: Path) -> None:
    import json

    from orchestrator.results.store import Store

    results = tmp_path / "results"
    make_run(results, label="cpu", seeds=[1, 2, 3], run_id="run-cpu", power_w=100)
    make_run(results, label="hog", seeds=[1, 2, 3], run_id="run-hog", power_w=100, other_cpu_pct=45.0)
    for run_id in ("run-cpu", "run-hog"):
        for seed in Store(results).open(run_id).paths.seed_dirs():  # what the sampler writes without a driver
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
    assert "did not record other processes' share" in "".join(parsed.text)  # an older series: busy alone
    # both runs keep the CPU near busy; the plot shows the share other processes took, which tells them apart
    assert hw_cli("report", "run-cpu", "run-hog", "--results", str(results), "--out", str(out)).code == 0
    parsed = Collect()
    parsed.feed(out.read_text())
    alts = [attrs.get("alt") for tag, attrs in parsed.tags if tag == "img"]
    assert "Host CPU: other processes' share over time" in alts
    assert "solid: other processes' share of the host's CPU (what disturbs a result)" in "".join(parsed.text)



def test_a_report_of_many_runs_counts_them_all_and_draws_the_newest_of_each_setup(tmp_path: Path, monkeypatch):
    """Every run counts in the verdict and the comparison (from the index, none opened for it); only
    the newest runs of each setup are read whole to be drawn and tabled, and the page says so: a
    report of 10,000 runs opened and drew them all (100 s and more)."""
    from orchestrator.insight.report_runs import load_report
    from orchestrator.insight.runs import chosen_runs, load_runs, to_setups
    from orchestrator.render import report
    from orchestrator.results.store import Store

    results = tmp_path / "results"
    ids = {label: [make_run(results, label=label, seeds=[1, 2, 3], power_w=300.0, other_cpu_pct=1.0)
                   for _ in range(count)] for label, count in (("a", 5), ("b", 2))}
    store = Store(results)
    every = to_setups(load_runs(store, [], ["a", "b"]))
    chosen, listing = chosen_runs(store, [], ["a", "b"])
    opened: list[str] = []
    real_open = Store.open
    monkeypatch.setattr(Store, "open", lambda self, run_id: opened.append(run_id) or real_open(self, run_id))
    found = load_report(store, chosen, listing, shown_per_setup=2)
    # the newest two of each setup, nothing more; "newest" in the store's order (its stamp is to the
    # second, so runs made within one second are ordered by id, not by when they were made)
    in_order = [run_id for run_id in chosen if run_id in ids["a"]]
    newest_a = in_order[-2:]
    assert sorted(opened) == sorted(newest_a + ids["b"])
    assert found.setups == every and [line.run_id for line in found.lines] == chosen
    assert found.hidden() == {"a": 3}
    page = report.render(found.views, setups=found.setups, lines=found.lines)
    text = html.unescape(page)
    assert "a: the newest 2 of its 5 runs; every run counts in the verdict" in text
    assert "seeds converged</dt><dd>15 of 15" in page and "over 5 runs" in text
    assert in_order[0] not in text.split("<h2>Seeds</h2>")[1]  # the oldest run is counted, not tabled


def test_the_scatter_plots_draw_a_bounded_spread_of_a_setup_of_thousands_of_seeds(monkeypatch) -> None:
    """A report of 2 x 15,000 seeds drew every one of them, twice a plot (wide and narrow): seconds
    of drawing. A setup of more than MAX_POINTS seeds is drawn by MAX_POINTS dots at evenly spaced
    ranks, its least and greatest among them; a smaller one, each seed as before."""
    from orchestrator.insight.compare import SeedResult, Setup
    from orchestrator.render import report_plots
    from orchestrator.render.svg_chart import Chart

    rng = np.random.default_rng(3)
    epochs = rng.uniform(20, 40, 15_000)
    def setup(name: str, epochs: np.ndarray, seconds_per_epoch: float) -> Setup:
        return Setup(name=name, seeds=tuple(SeedResult(seed=i, converged=True, epochs_to_target=e,
                                                       time_to_train_ms=e * seconds_per_epoch * 1000)
                                            for i, e in enumerate(epochs)))

    big, small = setup("big", epochs, 60), setup("small", epochs[:9], 50)
    drawn: list[np.ndarray] = []
    real = Chart.dots
    monkeypatch.setattr(Chart, "dots", lambda self, x, y, *args, **kw: drawn.append(np.asarray(y))
                        or real(self, x, y, *args, **kw))
    colors = {"big": "#000", "small": "#00f"}
    ttt = report_plots.ttt_plot([big, small], colors)
    split = report_plots.split_plot([big, small], colors)
    assert [len(y) for y in drawn] == [report_plots.MAX_POINTS, 9] * 2
    times = np.sort(epochs * 60)
    assert drawn[0][0] == times[0] and drawn[0][-1] == times[-1]
    assert list(drawn[1]) == list(epochs[:9] * 50)  # each seed, in its order
    assert "400 dots at evenly spaced ranks" in ttt.note and "400 dots" in split.note
    assert report_plots.ttt_plot([small], colors).note == "box: quartiles of converged runs; dots: one per seed"


def test_a_plot_of_lines_draws_each_seed_in_its_setups_collection_broken_where_a_sample_is_missing() -> None:
    """The accuracy, power and CPU plots draw one path per setup (one element per seed made the
    page's eight PNGs take seconds): every seed's line is in it, named once in the legend, broken at a
    missing sample as matplotlib's `plot` breaks a line at NaN."""
    from orchestrator.render.report_plots import _add_lines, chart

    axes = chart()
    t = np.arange(6, dtype=float)
    gap = np.column_stack([t, [1.0, 2.0, np.nan, 4.0, 5.0, 6.0]])
    named = _add_lines(axes, {"a": [np.column_stack([t, t]), gap], "b": [np.column_stack([t, -t])]},
                       {"a": "#f00", "b": "#00f"}, opacity=0.6, width=1)
    drawn = {line.label: line.segments for line in axes.line_sets}
    assert named == {"a", "b"} and set(drawn) == {"a", "b"}
    assert [len(segment) for segment in drawn["a"]] == [6, 2, 3]  # the gap splits the second seed's line
    axes.legend = True
    svg = ElementTree.fromstring(axes.svg())
    texts = [text.text for text in svg.iter(f"{SVG_NS}text")]
    assert texts.count("a") == 1 and texts.count("b") == 1  # each setup named once, in the legend
    box = next(rect for rect in svg.iter(f"{SVG_NS}rect") if rect.get("x"))  # the axes (the clip's rectangle)
    x, y, w, h = (float(box.get(k, 0)) for k in ("x", "y", "width", "height"))
    points = np.array([[float(v) for v in pair.split(",")] for path in svg.iter(f"{SVG_NS}path")
                       for pair in re.findall(r"[-\d.]+,[-\d.]+", path.get("d", ""))])
    assert len(points) == 6 + 2 + 3 + 6  # every point of every line, each in the axes
    assert (points[:, 0] >= x).all() and (points[:, 0] <= x + w).all()
    assert (points[:, 1] >= y).all() and (points[:, 1] <= y + h).all()
    faint = chart()
    _add_lines(faint, {"a": [gap]}, {"a": "#f00"}, labelled={"a"}, dash="dotted")
    assert faint.line_sets[0].label is None  # not named twice in a legend


def test_a_long_series_is_drawn_no_finer_than_its_pixels_and_keeps_its_peaks() -> None:
    """Hours of 1 Hz telemetry are tens of thousands of points a seed: drawn whole, an SVG plot of
    megabytes. A line is drawn by at most four points a pixel column (its first, least, greatest and
    last there), so that a peak or a dip one sample wide is still drawn, and both its ends."""
    from orchestrator.render.report_plots import PLOT_DPI, PLOT_SIZE, _add_lines, chart

    axes = chart(PLOT_SIZE)
    t = np.arange(36_000, dtype=float)  # ten hours at 1 Hz
    power = 300 + 20 * np.sin(t / 600)
    power[12_345], power[23_456] = 700.0, 0.0
    _add_lines(axes, {"a": [np.column_stack([t, power])]}, {"a": "#f00"})
    (drawn,) = axes.line_sets[0].segments
    assert len(drawn) <= 4 * PLOT_SIZE[0] * PLOT_DPI
    assert drawn[:, 1].max() == 700 and drawn[:, 1].min() == 0  # the peak and the dip
    assert tuple(drawn[0]) == (0, 300) and drawn[-1][0] == 35_999 and np.all(np.diff(drawn[:, 0]) > 0)
    narrow = chart((5.0, 4.2))
    _add_lines(narrow, {"a": [np.column_stack([t, power])]}, {"a": "#f00"})
    assert len(narrow.line_sets[0].segments[0]) <= 4 * 5.0 * PLOT_DPI  # a phone's plot: its own pixels


def test_a_seed_across_nodes_shows_each_nodes_own_figures_in_the_report(hw_cli, tmp_path: Path) -> None:
    """The seeds table of a seed whose nodes sampled themselves: GPU utilisation, throttling and the hint
    of each node, named by it, from its own series; the submitting host's (90% busy GPUs) nowhere, nor
    its GPU power in the plot."""
    import json

    from orchestrator.results.store import Store

    results = tmp_path / "results"
    make_run(results, label="nodes", seeds=[1, 2, 3], run_id="run-nodes", power_w=100)
    for seed in Store(results).open("run-nodes").paths.seed_dirs():
        host = json.loads(seed.telemetry.read_text())
        node = json.loads(seed.telemetry.read_text())
        node["gpus"][0]["util_pct"] = [40.0] * len(host["host"]["t_ms"])
        node["gpus"][0]["throttle_bits"] = [0x4] * len(host["host"]["t_ms"])
        cpu_node = {**host, "gpus": [], "gpu_source": {"available": False, "reason": "NVML not available"}}
        seed.node_telemetry.mkdir()
        (seed.node_telemetry / "n1.json").write_text(json.dumps(node))
        (seed.node_telemetry / "n2.json").write_text(json.dumps(cpu_node))
    out = tmp_path / "r.html"
    assert hw_cli("report", "run-nodes", "--results", str(results), "--out", str(out)).code == 0
    parsed = Collect()
    parsed.feed(out.read_text())
    said = parsed.text
    assert said.count("n1: 40%") == 3 and said.count("n2: unknown") == 3
    assert said.count("n1: sw_power_cap 100%") == 3 and said.count("n2: none") == 3
    assert said.count("n1: GPUs idle in 100% of samples without a saturated CPU or disk (synchronisation?)") == 3
    assert said.count("n2: no GPU") == 3
    assert "90%" not in said  # the submitting host's GPU utilisation (a cell of its own before) is no node's
    assert "dotted: run_start; a seed across nodes: a line per node, each from the node's own series" in said
    for seed in Store(results).open("run-nodes").paths.seed_dirs():  # no node has a GPU: no power is plotted,
        (seed.node_telemetry / "n1.json").write_text((seed.node_telemetry / "n2.json").read_text())  # not the host's
    assert hw_cli("report", "run-nodes", "--results", str(results), "--out", str(out)).code == 0
    parsed = Collect()
    parsed.feed(out.read_text())
    assert "no GPU power to plot: NVML not available" in "".join(parsed.text)
    assert "Host CPU busy over time" in [attrs.get("alt") for tag, attrs in parsed.tags if tag == "img"]


def test_a_report_imports_no_matplotlib(tmp_path: Path) -> None:
    """Importing matplotlib and drawing the eight figures with it took 1.4 s of CPU, about half of a
    report of 40 runs: the report's plots are drawn by `render.svg_chart`, its page whole."""
    import json
    import os
    import sys

    results, out = tmp_path / "results", tmp_path / "report.html"
    for label in ("a", "b"):
        make_run(results, label=label, seeds=[1, 2, 3], power_w=300.0)
    code = ("import json, sys\nfrom orchestrator.cli import main\n"
            f"code = main(['report', '--label', 'a', '--label', 'b', '--out', {str(out)!r}])\n"
            "print(json.dumps({'code': code, 'matplotlib': 'matplotlib' in sys.modules}), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "MLTRAIN_RESULTS": str(results)})
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"code": 0, "matplotlib": False}
    assert out.read_text().count('src="data:image/svg+xml;base64,') == 4
