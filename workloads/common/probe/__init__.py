"""The qualification probe: microbenchmarks run where the workload runs (a local process, the
workload's container, a Slurm node), so that they qualify that place's torch, CUDA and drivers too.

    MLTRAIN_PROBE_CONFIG='{"cpu": {"gemm": {"dtypes": ["fp32"], "dense": [[512, 512, 512]]}}}' \
        python -m workloads.common.probe 1

It ships with ``workloads/`` (every image copies it, the wheel holds it) and never imports the
orchestrator, which runs it as a job (`orchestrator/qualify/micro.py`, the command named in
``qualify.yaml``'s ``probe:``) and reads its ``:::PROBE`` lines.

    __main__.py   the entry: settings, the seed, each check of the configured order
    settings.py   MLTRAIN_PROBE_CONFIG (JSON), checked before torch is imported
    registry.py   the registration (CHECKS); each check one module with its DECLARATION (read by the
                  orchestrator as data: what it needs, its sanity rule, units, timeout, settings):
    gemm.py conv.py memory.py storage.py nccl.py bandwidth.py (host<->device per GPU, GPU to GPU)
    sdc.py (the same bits, run after run and GPU after GPU) nccl_pairs.py (between two nodes: a fleet's)
    harness.py    timing (batches between synchronisations), a check's cases (unless the device lacks
                  what its declaration needs), running one to its line
    device.py     the device and its facts (CUDA devices by UUID and PCI bus id)
    dtypes.py     which dtypes run natively (workloads.common.precision), TF32 as a mode
    sanity.py     the comparisons sanity functions are made of
    protocol.py   the :::PROBE line format (protocol 2): sanity and performance apart
"""
