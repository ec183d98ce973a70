"""The MLPerf Inference harness: the real LoadGen (``mlperf_loadgen``) driving ONNX Runtime or torch.

Workload-side code: it runs where the benchmark runs (this host, the workload image, a Slurm node)
and never imports the orchestrator. What it leaves in its results folder is LoadGen's own logs in
the MLPerf Inference layout, the accuracy script's ``accuracy.txt`` and one facts file
(``harness.json``, `workloads.inference.facts`). Model facts the orchestrator needs are declared in
``inference.yaml`` beside this file; the per-model processing is ``models/<name>.py``.
"""
