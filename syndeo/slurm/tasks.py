"""invoke tasks for the Slurm target; the project's tasks.py adds them as ``slurm.*``.

invoke slurm.up --nodes 3        # local test cluster (root): slurmctld + 3 slurmd in netns
invoke slurm.status              # nodes and jobs
invoke slurm.cancel --cluster-id slurm-1a2b3c4d   (or --job-id 42)
invoke slurm.down                # stop it and remove everything it created
"""

from __future__ import annotations

import getpass

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.errors import SyndeoError
from syndeo.slurm import jobs, localcluster


@task(
    help={
        "nodes": "number of slurmd nodes",
        "cpus_per_node": "CPUs each node declares",
        "gpu_nodes": "extra nodes in a partition 'gpu', each with a gres gpu:1 (device /dev/null)",
    }
)
def slurm_up(c: Context, nodes: int = 3, cpus_per_node: int = 4, gpu_nodes: int = 0) -> None:
    """Start a real local Slurm cluster (root): each node its own netns, hostname and IP."""
    try:
        cluster = localcluster.up(nodes=nodes, cpus_per_node=cpus_per_node, gpu_nodes=gpu_nodes)
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    ips = ", ".join(f"{n.name}={n.ip}" for n in cluster.nodes)
    parts = repr(cluster.partition) + (
        f", {localcluster.GPU_PARTITION!r} ({cluster.gpu_nodes} node(s))"
        if cluster.gpu_nodes
        else ""
    )
    print(f"local Slurm cluster up: {ips} (partition {parts}; {cluster.proctrack})")
    print("submit as an unprivileged user, e.g. `invoke deploy --target slurm --nodes 3`")


@task
def slurm_down(c: Context) -> None:
    """Stop the local Slurm cluster and remove its namespaces, links, cgroups and state."""
    try:
        localcluster.down()
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print("local Slurm cluster down")


@task
def slurm_status(c: Context) -> None:
    """The local cluster's nodes, or (on a real site) your Slurm jobs."""
    if localcluster.load() is not None:
        print(localcluster.status())
        return
    c.run(f"squeue -u {getpass.getuser()} -o '%i %j %T %D %N %R'", warn=True)


@task(help={"cluster_id": "the syndeo cluster id (the job's name)", "job_id": "a Slurm job id"})
def slurm_cancel(c: Context, cluster_id: str = "", job_id: str = "") -> None:
    """Cancel a syndeo Slurm job; its nodes stop their Ray, Slurm removes the rest."""
    if bool(cluster_id) == bool(job_id):
        raise Exit("syndeo: error: give exactly one of --cluster-id or --job-id", code=2)
    try:
        if job_id:
            jobs.cancel(job_id)
        else:
            c.run(f"scancel --name={cluster_id} --user={getpass.getuser()}", hide=True)
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    print(f"cancelled {job_id or cluster_id}")


slurm_ns = Collection("slurm")
slurm_ns.add_task(slurm_up, name="up")  # type: ignore[arg-type]
slurm_ns.add_task(slurm_down, name="down")  # type: ignore[arg-type]
slurm_ns.add_task(slurm_status, name="status")  # type: ignore[arg-type]
slurm_ns.add_task(slurm_cancel, name="cancel")  # type: ignore[arg-type]
