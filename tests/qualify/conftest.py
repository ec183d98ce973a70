"""The real Slurm cluster's fixtures (tests/slurm) for the fleet test of this folder."""

from tests.slurm.conftest import slurm_cluster, slurm_env  # noqa: F401 - fixtures, found by name
