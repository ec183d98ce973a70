"""Packaging beyond what pyproject.toml can say: ship the top-level seeds.yaml and docker/ inside
the wheel, as ``orchestrator/bundled/``, where an installed mltrain finds them
(`orchestrator.config.locations.project_files`). A checkout, editable install included, reads
them where they are. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

BUNDLE = "orchestrator.bundled"


class BuildPy(build_py):
    """The bundle maps the repository root, so its only modules would be this file: ship its data alone."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        return [] if package == BUNDLE else super().find_package_modules(package, package_dir)


setup(
    cmdclass={"build_py": BuildPy},
    packages=[*find_packages(include=["orchestrator", "orchestrator.*", "workloads", "workloads.*"]), BUNDLE],
    package_dir={BUNDLE: "."},
    package_data={
        # Data beside the code of every package: a workload folder's declaration, scripts and
        # reference files (workload.yaml, run_and_time.sh, checksum.json ...), tables (*.csv).
        "": ["*.yaml", "*.json", "*.txt", "*.sh", "*.csv"],
        BUNDLE: ["seeds.yaml", "docker/*.Dockerfile", "docker/README.md"],
    },
)
