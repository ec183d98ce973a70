"""The real engines' fixtures (tests/slurm, tests/docker) for the fleet and container tests here."""

from tests.docker.conftest import (  # noqa: F401 - fixtures, found by name
    cli_with_build,
    containers,
    docker_cli,
    docker_engine,
    no_leftover_containers,
    test_base_image,
    torch_base_image,
)
from tests.slurm.conftest import slurm_cluster, slurm_env  # noqa: F401
