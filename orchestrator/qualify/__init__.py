"""Node qualification (`mltrain qualify`): health read on the node through NVML and DCGM, the
microbenchmark probe and the workload's throughput mode run through the runner where the workload
runs, each check's sanity kept apart from its numbers, the numbers judged against references
(the operator's file or the node's own history), one verdict per node, and the fleet on Slurm.

    checks/        the checks as objects, each declared once (what it needs, its sanity rule, its units,
                   its own floor, its timeout, whether the quorum repeats it, what a FAIL asks for, its
                   settings' model), and the `Registry` type
    catalog.py     mltrain's checks, registered above them, one line each (`default_registry`)
    config.py      qualify.yaml: suites per device kind (each check's settings, typed by the registry it
                   is given), history and fleet policies; --suite resolved once (`choose_suite`)
    micro.py       the probe (workloads/common/probe/: GEMM, conv, memory, storage, NCCL) as a job on
                   the runner (`runners.jobs`), its cases as checks: sanity (right results) apart from numbers
    probe_lines.py the probe's :::PROBE lines read back (protocol 2)
    throughput.py  the workload's throughput mode as a check
    health.py      NVML health before, under and after the load, every GPU NVML sees
    devices.py     NVML's GPUs against the ones the probe's CUDA used (UUID, PCI bus id), per-GPU names
    dcgm.py        `dcgmi diag -r N -j`, where DCGM is installed
    time_to_train.py  the full suite's one seed, run and scored by session.loop
    references.py  operator references (ReFrame style), references learned from history, which one judges
    floors.py      floors of known GPU models (floors.yaml: datasheets, published MLPerf rates)
    judge.py       measurement, check and node verdicts; exit codes
    quorum.py      a number that failed its reference measured again before it FAILs (through the same
                   check objects: `node._again`)
    drift.py       CUSUM on each number's nightly series: a slow fall WARNs before the floor
    node.py        one node, top to bottom
    fleet.py       one exclusive Slurm job per node (its `NodeOrder`), gathered and compared with the fleet
    leftovers.py   the jobs a killed qualification left, stopped by the next one
"""
