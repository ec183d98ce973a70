"""``--runner slurm-docker``: a seed is one Slurm job (on ``--nodes N``) whose launcher on each node runs
in a container of the workload's image.

The image is built (or found unchanged) on this host's engine as the docker runner builds it, and
before anything is written every node a seed may run on (``--nodelist``'s, else the partition's) is
asked whether its own engine holds it (one ``srun`` step, `missing_image`): a node without it is one
line, exit 2, naming the node. Each seed's batch script is the Slurm runner's across nodes
(`orchestrator.runners.nodes`: the rendezvous on the first node, one launcher per node through srun),
its per-node command `orchestrator.runners.node_container` with the container the seed's folder
holds (``container.json``: image, command, environment, mounts, the submitting user), which it runs on
the host's network with the node's place in the job and removes however the seed ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import RunnerError, UsageError
from orchestrator.results import atomic
from orchestrator.runners import node_container
from orchestrator.runners.base import Bundle, DatasetArg, DatasetResult, Job, JobSpec
from orchestrator.runners.docker.engine import connect, invoking_user, remove_leftovers
from orchestrator.runners.docker.images import BuiltImage, build_spec, ensure_image
from orchestrator.runners.docker.probes import Ulimits, image_env_versions, probe_versions
from orchestrator.runners.docker.runner import (
    CONTAINER_WORKDIR,
    check_base_image,
    check_ipc_and_shm,
    container_argv,
    container_environment,
    container_name,
    image_record,
)
from orchestrator.runners.slurm import SlurmOptions, SlurmRunner, _last_line, _slurm, batch_script, node_names


def missing_image(tag: str, nodes: Sequence[str], *, partition: str | None) -> dict[str, str]:
    """Each of ``nodes`` whose engine does not hold ``tag``, and why ("not there", or its engine's
    error), asked of every node at once in one srun step."""
    argv = ["srun", f"--nodes={len(nodes)}", "--ntasks-per-node=1", f"--nodelist={','.join(nodes)}",
            "--job-name=mltrain-image-check", "--time=1", "--quiet", *([f"--partition={partition}"] if partition
                                                                          else []),
            "python", "-m", node_container.__name__, "--has-image", tag]
    result = _slurm(argv)
    said: dict[str, dict[str, Any]] = {}
    for line in result.stdout.splitlines():
        if line.startswith(node_container.IMAGE_LINE):
            try:
                answer = json.loads(line[len(node_container.IMAGE_LINE):])
            except json.JSONDecodeError:
                continue
            if isinstance(answer, dict) and isinstance(answer.get("node"), str):
                said[answer["node"]] = answer
    if not said:
        raise RunnerError(f"no node said whether it holds image {tag}: {_last_line(result)}")
    missing: dict[str, str] = {}
    for node in nodes:
        answer = said.get(node)
        if answer is None:
            missing[node] = "it did not answer"
        elif answer.get("error"):
            missing[node] = str(answer["error"])
        elif not answer.get("present"):
            missing[node] = ""
    return missing


def missing_said(tag: str, missing: dict[str, str], checked: Sequence[str]) -> Exception:
    """The one line for the nodes that lack the image: UsageError (exit 2) when each simply lacks it,
    RunnerError (exit 3) when a node's engine could not be asked."""
    lacking = sorted(node for node, why in missing.items() if not why)
    if lacking:
        nodes = f"node{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}"
        return UsageError(f"image {tag} is not on {nodes} (of {', '.join(checked)}): load it there"
                          f" (docker save {tag} | ssh NODE docker load) or push it where the nodes pull from,"
                          " then run again")
    node, why = sorted(missing.items())[0]
    return RunnerError(f"node {node} cannot say whether it holds image {tag}: {why}")


class SlurmDockerRunner(SlurmRunner):
    """One Slurm job per seed; on each of its nodes, the launcher in a container of the workload's image."""

    name = "slurm-docker"

    def __init__(self, project_root: Path, options: SlurmOptions, *, files_root: Path, shm_size: str = "1g",
                 ipc: str = "host", base_image: str | None = None, rebuild: bool = False,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        super().__init__(project_root, options)
        check_ipc_and_shm(ipc, shm_size)
        self.files_root = files_root
        self.shm_size = shm_size.lower()
        self.ipc = ipc
        self.base_image = check_base_image(base_image)
        self.rebuild = rebuild
        self.on_status = on_status
        self.user = invoking_user()
        self._image: BuiltImage | None = None
        self._ulimits = Ulimits()

    def prepare(self, bundle: Bundle) -> dict[str, Any]:
        provenance = super().prepare(bundle)
        client = connect()
        image = ensure_image(client, build_spec(bundle, self.files_root, base_image=self.base_image),
                             rebuild=self.rebuild, on_status=self.on_status)
        attrs = client.images.get(image.tag).attrs
        versions = probe_versions(client, image.tag, user=self.user, ulimits=self._ulimits, on_status=self.on_status)
        versions.update(image_env_versions(attrs))
        checked = node_names(self.options.partition, hostlist=self.options.nodelist)
        if missing := missing_image(image.tag, checked, partition=self.options.partition):
            raise missing_said(image.tag, missing, checked)
        self.on_status(f"image {image.tag} is on every node ({', '.join(checked)})")
        self._image = image
        return {**provenance, "runner": self.name, "nodes": self.options.nodes,
                "image": image_record(image, attrs), "base_image": {"ref": image.base_image, "id": image.base_image_id},
                "versions": versions, "image_on_nodes": checked,
                "container": {"network": "host", "ipc": self.ipc, "user": self.user,
                              "ulimits": dict(self._ulimits.values),
                              "shm_size": self.shm_size if self.ipc == "private" else "host /dev/shm (ipc=host)"}}

    def container(self, spec: JobSpec) -> node_container.NodeContainer:
        """The container each node of ``spec``'s job starts."""
        return node_container.NodeContainer(
            image=self._image.tag if self._image is not None else "", name=container_name(spec.run_id, spec.name),
            argv=(*container_argv(spec.bundle, spec.command), *spec.args), env=container_environment(spec, self.user),
            labels=spec.marks(), user=self.user, data_dir=str(spec.data_dir), results_dir=str(spec.results_dir),
            working_dir=CONTAINER_WORKDIR, ipc=self.ipc, shm_size=self.shm_size, ulimits=dict(self._ulimits.values),
            gpus=self.options.gpus_per_node is not None or self.options.gpus not in (None, "none"))

    def _script(self, job: JobSpec) -> str:
        return batch_script(job, self.options, project_root=self.project_root, output=job.paths.slurm_output,
                            container=job.paths.container_spec)

    def submit(self, spec: JobSpec) -> Job:
        if self._image is None:
            raise RunnerError("SlurmDockerRunner.submit before prepare: the image is not built")
        spec.results_dir.mkdir(parents=True, exist_ok=True)  # bound at /results on every node
        atomic.write_text(spec.paths.container_spec, self.container(spec).model_dump_json(indent=1) + "\n")
        return super().submit(spec)

    def stop_leftovers(self, run_id: str) -> list[str]:
        """The run's Slurm jobs cancelled (each node's launcher then removes its container), and any
        container of the run this host's engine still holds (a launcher SIGKILLed on a node that is this host)."""
        stopped = super().stop_leftovers(run_id)
        try:
            client = connect()
        except RunnerError:
            return stopped
        return [*stopped, *(f"container {name}" for name in remove_leftovers(client, run_id))]

    def dataset_command(
        self, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """In a helper container of the image on this host's engine (the data folder is the nodes' too)."""
        from orchestrator.runners.docker.datasets import run_dataset_command

        if self._image is None:
            raise RunnerError("SlurmDockerRunner.dataset_command before prepare: the image is not built")
        return run_dataset_command(
            connect(), self._image.tag, bundle, container_argv(bundle, bundle.data.cli), args,
            user=self.user, working_dir=CONTAINER_WORKDIR, timeout_s=timeout_s, on_line=on_line,
        )
