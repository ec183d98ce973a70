"""Qualification checks as objects, each declared once (`declaration.Declaration`): what it needs,
its sanity rule apart from its numbers, its references' units, its timeout, whether the quorum may
repeat it, what a FAIL asks for, its settings' type (each orchestrator check's module holds its settings'
model). A registry (`registry.Registry`) lists them; mltrain's is registered above them
(`orchestrator.qualify.catalog`); a node runs them in a loop (`base.run_check`), the quorum repeats
them through the same objects.

    declaration.py    the declaration, and a probe check's settings typed from its own
    probe_declared.py the probe's checks, read as data from workloads/common/probe/
    registry.py       a registry of checks, in order (it names none: `qualify.catalog` registers them)
    base.py           running a check: its needs, its timeout
    context.py        what a check runs with on a node (the plan, the runner, the probe's run)
    gpu_health.py dcgm_diag.py probe.py throughput.py inference.py time_to_train.py   the checks
"""
