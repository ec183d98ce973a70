"""Packaging beyond what pyproject.toml can say: ship the top-level seeds.yaml and docker/ inside
the wheel, as ``orchestrator/bundled/``, where an installed mltrain finds them
(`orchestrator.config.locations.project_files`). A checkout, editable install included, reads
them where they are. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["orchestrator", "orchestrator.*", "workloads", "workloads.*"]),
              "orchestrator.bundled"],
    package_dir={"orchestrator.bundled": "."},
    package_data={
        # Data beside the code of every package: a workload folder's declaration, scripts and
        # reference files (workload.yaml, run_and_time.sh, checksum.json ...), tables (*.csv).
        "": ["*.yaml", "*.json", "*.txt", "*.sh", "*.csv"],
        "orchestrator.bundled": ["seeds.yaml", "docker/*.Dockerfile", "docker/README.md"],
    },
)
