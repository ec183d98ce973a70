"""mltrain's 3D-UNet inference beside the MLPerf Inference reference's, on the same synthetic raw KiTS19
cases and the same ONNX model: preprocessing (values and file bytes), the sliding window's response,
and the Dice of the reference's accuracy_kits.py against ours on our LoadGen accuracy log.

    python benchmarks/kits19_inference_parity.py --reference ~/src/inference [--cases 7] [--size 150,180,200]

--reference: a checkout of mlcommons/inference (default $MLPERF_INFERENCE_DIR); it is run from where
it is, in its own processes (tests/inference/kits19_reference.py says how, and which shims its code
needs on today's SciPy and pandas; `pip install '.[reference]'` brings pandas). The model segments
by the nearest class mean intensity (untrained, so that the Dice compared is neither 0 nor 1); the
cases are ids 0..N-1 of the synthetic generator, of which those in the reference's inference list are
compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from tests.inference.kits19_reference import ENV, SUBDIR, classifier, compare  # noqa: E402
from workloads.inference.kits19.prepare import prepare  # noqa: E402
from workloads.unet3d.synthetic import parse_size  # noqa: E402
from workloads.unet3d.synthetic_raw import generate_raw  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=os.environ.get(ENV), help=f"default: ${ENV}")
    parser.add_argument("--cases", type=int, default=7, help="raw cases 0..N-1 (default 7: 4 are inference cases)")
    parser.add_argument("--size", default="150,180,200", help="about their size after resampling (D,H,W)")
    args = parser.parse_args()
    if args.reference is None or not (args.reference / SUBDIR / "preprocess.py").is_file():
        parser.error(f"--reference: give a checkout of mlcommons/inference (it has {SUBDIR}/preprocess.py)")
    with tempfile.TemporaryDirectory(prefix="kits19-parity-") as scratch:
        work = Path(scratch)
        generate_raw(work / "raw", args.cases, 0, parse_size(args.size), workers=1)
        model = classifier(work / "nearest.onnx", prepare(work / "raw", work / "cache", workers=1).folder)
        started = time.monotonic()
        parity = compare(args.reference / SUBDIR, work / "raw", model, work)
        seconds = time.monotonic() - started
    print(f"3D-UNet inference, mltrain vs the MLPerf Inference reference ({args.reference}), {len(parity.cases)} "
          f"synthetic cases, ROI 128^3, overlap 0.5, ONNX Runtime CPU ({seconds:.0f} s)")
    print(f"{'case':<12} {'shape':<20} {'values':<8} {'bytes':<8} {'response':<9} {'kidney ours / theirs':<44} "
          "tumour ours / theirs")
    for case in parity.cases:
        kidney, their_kidney, tumour, their_tumour = parity.per_case[case.case]
        print(f"{case.case:<12} {'x'.join(map(str, case.shape)):<20} {_same(case.arrays_equal):<8} "
              f"{_same(case.bytes_equal):<8} {_same(case.segmentation_equal):<9} "
              f"{kidney!r:>21} {their_kidney!r:<22} {tumour!r:>21} {their_tumour!r}")
    print(f"ours:   {parity.our_line}")
    print(f"theirs: {parity.their_line}")
    identical = (all(c.arrays_equal and c.bytes_equal and c.segmentation_equal for c in parity.cases)
                 and parity.our_line == parity.their_line
                 and all(a == b and c == d for a, b, c, d in parity.per_case.values()))
    print(f"preprocessed inputs {sum(c.bytes_equal for c in parity.cases)}/{len(parity.cases)} identical, responses "
          f"{sum(c.segmentation_equal for c in parity.cases)}/{len(parity.cases)} identical, accuracy "
          f"{'identical' if identical else 'DIFFERENT'}")
    return 0 if identical else 1


def _same(equal: bool) -> str:
    return "same" if equal else "DIFFER"


if __name__ == "__main__":
    sys.exit(main())
