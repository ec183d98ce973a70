"""The summary table of `benchmarks/gpu_session.sh`: each part's outcome, its seconds against its limit,
and the numbers it measured, read from the files the parts wrote into $OUT.

    python benchmarks/gpu_session_summary.py PARTS_TSV OUT_DIR ENV_TXT TOTAL_SECONDS

PARTS_TSV holds one line per part: name, exit status (or ``skipped``), seconds, limit, why skipped.
Exit 0 when every part ran and exited 0, else 1. A part's file that is missing or unreadable is said
so in its row; it never stops the table.
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

BUDGET_S = 480


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def rate(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.0f}" if value >= 100 else f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return f"{text}{unit}"


def cuda_tests(out: Path) -> str:
    suite = ET.parse(out / "cuda_tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, failures, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    failed = [f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}" for case in suite.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    line = f"{tests - failures - errors - skipped} passed, {failures + errors} failed, {skipped} skipped"
    return line + (f" ({', '.join(failed[:4])}{' ...' if len(failed) > 4 else ''})" if failed else "")


def unet3d(out: Path) -> str:
    data = load(out / "unet3d.json")
    results = {r["name"]: r for r in data["results"]}
    parts = [f"{name} {rate(r['train_samples_per_s'])}" for name, r in results.items()]
    line = "train samples/s: " + ", ".join(parts)
    best = max((r for n, r in results.items() if n.startswith("ours")), key=lambda r: r["train_samples_per_s"] or 0,
               default=None)
    for base in ("reference-amp", "reference"):
        if best and base in results and results[base]["train_samples_per_s"]:
            ratio = best["train_samples_per_s"] / results[base]["train_samples_per_s"]
            line += f"; {best['name']} / {base} {ratio:.2f}x"
            break
    check = data.get("dice_check")
    if check:
        line += f"; Dice vs the reference: max |diff| {check['max_dice_difference']:.1e}"
    return line


def unet3d_variants(out: Path) -> str:
    data = load(out / "unet3d_variants.json")
    base = next((v for k, v in sorted(data.get("baseline", {}).items(), reverse=True) if v.get("train_samples_per_s")),
                None)  # reference-amp before reference
    parts = []
    for r in data["results"]:
        train = r["train_samples_per_s"]
        what = rate(train) if train else f"eval {rate(r['eval_windows_per_s'])} windows/s"
        if base and r["train_samples_per_s"]:
            what += f" ({r['train_samples_per_s'] / base['train_samples_per_s']:.2f}x)"
        parity = r["details"].get("parity", {})
        if parity.get("logit_rel_diff", 0) > 0.1 or parity.get("loss_rel_diff", 0) > 0.01:
            what += " PARITY OFF"
        parts.append(f"{r['name']} {what}")
    skipped = [s["name"] for s in data.get("skipped", [])]
    return ("samples/s: " + ", ".join(parts) if parts else "nothing measured") + \
        (f"; skipped {', '.join(skipped)}" if skipped else "")


def resnet50(out: Path) -> str:
    data = load(out / "resnet50.json")
    modes = data.get("modes", {})
    best = data.get("best_precision", "")
    ours = modes.get(f"ours {best} channels_last", {}).get("images_per_s")
    theirs = modes.get(f"torchvision {best} channels_last", {}).get("images_per_s")
    line = f"ours {rate(ours)} images/s"
    if ours and theirs:
        line += f", torchvision {rate(theirs)} ({ours / theirs:.2f}x)"
    for decode, entry in data.get("pipelines", {}).items():
        if "of_synthetic_input" in entry:
            line += f"; fed by the loader ({decode}) {rate(entry['training_images_per_s'])} = " \
                    f"{entry['of_synthetic_input']:.0%} of that"
    return line


def qualify(out: Path) -> str:
    data = load(out / "qualify.json")
    checks = [f"{c['name']} {c['status']}" for c in data.get("checks", [])]
    return f"{str(data.get('verdict', '?')).upper()}: " + ", ".join(checks)


def inference(out: Path) -> str:
    data = load(out / "inference.json")
    result = data["result"]
    perf = result["performance"]
    line = f"{data['model']} {data['scenario']} on {data['backend']}/{data['device']}: "
    line += f"{rate(perf['value'])} {perf['unit']}"
    p90 = (perf.get("latency") or {}).get("percentiles_ns", {}).get("90.00")
    if p90 is not None:
        line += f", p90 {rate(p90 / 1e6)} ms"
    accuracy = result.get("accuracy") or {}
    if accuracy.get("percent") is not None:
        line += f", {accuracy.get('metric', 'accuracy')} {accuracy['percent']:.1f}%"
    return line + f"; LoadGen {'VALID' if perf.get('loadgen_valid') else 'INVALID'}"


def llama31_8b(out: Path) -> str:
    """The last ``throughput`` MLLOG event the part logged in session.log (its section: from its
    ``== llama31_8b`` line to the next part's)."""
    section, event = False, None
    for line in (out / "session.log").read_text(errors="replace").splitlines():
        if line.startswith("== "):
            section = line.startswith("== llama31_8b ")
        elif section and ":::MLLOG " in line:
            record = json.loads(line.split(":::MLLOG ", 1)[1])
            if record.get("key") == "throughput":
                event = record
    if event is None:
        return "(no throughput event in session.log)"
    meta = event["metadata"]
    mfu = meta.get("mfu")
    return (f"{meta['layers']} layers x {meta['seq_len']} tokens, {meta['precision']}: "
            f"{rate(meta['tokens_per_second_per_device'])} tokens/s per device, "
            f"{rate(meta['model_tflops_per_device'])} TFLOPS, MFU {'unknown' if mfu is None else f'{mfu:.2f}'}")


HEADLINES: dict[str, Callable[[Path], str]] = {"cuda_tests": cuda_tests, "unet3d": unet3d,
                                              "unet3d_variants": unet3d_variants, "llama31_8b": llama31_8b,
                                              "resnet50": resnet50, "qualify": qualify, "inference": inference}


def main(argv: list[str]) -> int:
    parts_tsv, out, env, total = Path(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    rows = [line.split("\t") for line in parts_tsv.read_text().splitlines() if line.strip()]
    env_lines = [line for line in env.read_text().splitlines() if line.strip()] if env.is_file() else []
    print("mltrain GPU session")
    for line in env_lines[1:]:
        print(f"  {line}")
    print(f"{'part':<16} {'outcome':<20} {'seconds':>13}  what it measured")
    every_part_ran = True
    for row in rows:
        name, status, seconds, limit = row[:4]
        if status == "skipped":
            outcome, timing, every_part_ran = "skipped", "", False
            headline = row[4] if len(row) > 4 else ""
        else:
            rc = int(status)
            outcome = "ok" if rc == 0 else f"cut at {limit} s" if rc in (124, 137) else f"FAILED (exit {rc})"
            every_part_ran &= rc == 0
            timing = f"{seconds} / {limit}"
            headline = ""
            if name in HEADLINES:
                try:
                    headline = HEADLINES[name](out)
                except FileNotFoundError as err:
                    headline = f"(no {Path(err.filename).name})"
                except (ValueError, KeyError, TypeError, AttributeError, ET.ParseError,
                        statistics.StatisticsError) as err:
                    headline = f"(unreadable: {type(err).__name__} {err})"
        print(f"{name:<16} {outcome:<20} {timing:>13}  {headline}")
    verdict = "every part ran and passed" if every_part_ran else "NOT every part ran and passed"
    print(f"total {total} s of a {BUDGET_S} s budget: {verdict}")
    return 0 if every_part_ran else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
