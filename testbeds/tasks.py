"""invoke tasks for the test beds; the project's tasks.py adds them as ``aws-emulator.*``
and ``slurm.up`` / ``slurm.down`` / ``slurm.status``.

sudo invoke slurm.up --nodes 3   # local Slurm cluster (root): slurmctld + 3 slurmd in netns
sudo invoke slurm.down           # stop it and remove everything it created

sudo invoke aws-emulator.up --image .syndeo/image/syndeo-debootstrap.sif   # prints what to export
invoke deploy --target aws --nodes 3 --instance-type c7i.large --region us-east-1 --image ami-…
sudo invoke aws-emulator.down
"""

from __future__ import annotations

import shlex
from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.cli.slurm_tasks import slurm_jobs
from syndeo.core.errors import SyndeoError
from testbeds import awsemu, slurmcluster


@task(
    auto_shortflags=False,
    help={"image": "the node image (.sif) the emulated AMI stands for (`invoke build` makes it)"},
)
def emulator_up(c: Context, image: str = ".syndeo/image/syndeo-debootstrap.sif") -> None:
    """Start an emulated AWS on this machine (root): moto + one netns machine per instance."""
    try:
        state = awsemu.up(sif=Path(image))
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"emulated AWS up at {state.endpoint} (region {state.region}); export:")
    for k, v in state.env().items():
        print(f"export {k}={shlex.quote(v)}")
    print(f"# the baked image: --image {state.image_id}")


@task(auto_shortflags=False)
def emulator_down(c: Context) -> None:
    """Power off every emulated instance and stop the emulated AWS (root)."""
    try:
        awsemu.down()
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print("emulated AWS down")


@task(
    auto_shortflags=False,
    help={
        "nodes": "number of slurmd nodes",
        "cpus_per_node": "CPUs each node declares",
        "gpu_nodes": "extra nodes in a partition 'gpu', each with a gres gpu:1 (device /dev/null)",
    },
)
def slurm_up(c: Context, nodes: int = 3, cpus_per_node: int = 4, gpu_nodes: int = 0) -> None:
    """Start a real local Slurm cluster (root): each node its own netns, hostname and IP."""
    try:
        cluster = slurmcluster.up(nodes=nodes, cpus_per_node=cpus_per_node, gpu_nodes=gpu_nodes)
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    ips = ", ".join(f"{n.name}={n.ip}" for n in cluster.nodes)
    parts = repr(cluster.partition) + (
        f", {slurmcluster.GPU_PARTITION!r} ({cluster.gpu_nodes} node(s))"
        if cluster.gpu_nodes
        else ""
    )
    print(f"local Slurm cluster up: {ips} (partition {parts}; {cluster.proctrack})")
    print("submit as an unprivileged user, e.g. `invoke deploy --target slurm --nodes 3`")


@task(auto_shortflags=False)
def slurm_down(c: Context) -> None:
    """Stop the local Slurm cluster and remove its namespaces, links, cgroups and state."""
    try:
        slurmcluster.down()
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print("local Slurm cluster down")


@task(auto_shortflags=False)
def slurm_status(c: Context) -> None:
    """The local cluster's nodes, or (on a real site) your Slurm jobs."""
    if slurmcluster.load() is not None:
        print(slurmcluster.status())
        return
    slurm_jobs(c)
