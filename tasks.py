"""invoke front end: thin typed tasks over syndeo's library functions.

invoke deploy --target local --nodes 3        # cluster up, benchmark, results, teardown
invoke deploy --run "python train.py"         # your own Ray program instead
invoke up / invoke down                        # a long-lived cluster
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from benchmarks.tasks import bench_bringup, bench_rendezvous
from syndeo.cli import image_tasks, job_tasks, slurm_tasks, verbs
from syndeo.cli.bench_tasks import bench, report
from syndeo.cli.options import invoke_help
from syndeo.core.errors import SyndeoError
from testbeds import tasks as testbed_tasks


@contextmanager
def _exit_on_error() -> Iterator[None]:
    try:
        yield
    except SyndeoError as exc:
        raise Exit(f"syndeo: error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("syndeo: interrupted", code=130) from None


def _number(kind: Callable[[str], Any], flag: str, value: Any) -> Any:
    """invoke hands an option whose default is None over as text: make it the number it
    is (pydantic does this for deploy/up's settings; grow/shrink pass theirs on as is)."""
    if value is None:
        return None
    try:
        return kind(str(value))
    except ValueError:
        raise Exit(f"syndeo: error: {flag}: {value!r} is not a number", code=2) from None


def _call(fn: Callable[..., Any], **options: Any) -> None:
    with _exit_on_error():
        fn(**options)


def _cluster_options(
    target: str | None, nodes: int | None, cpus_per_node: int | None,
    gpus_per_node: int | None, memory_mb_per_node: int | None,
    object_store_mb_per_node: int | None, cluster_id: str | None, rendezvous: str | None,
    join_timeout: float | None, container: str | None, workdir: str | None,
    hosts: str | None, ssh_user: str | None, ssh_key: str | None, instance_type: str | None,
    region: str | None, image: str | None, spot: bool, tls: bool,
) -> dict[str, Any]:  # fmt: skip
    """invoke's names -> the verbs' keywords (the table in syndeo/cli/options.py)."""
    return dict(
        target=target, nodes=nodes, cpus_per_node=cpus_per_node, gpus_per_node=gpus_per_node,
        memory_mb_per_node=memory_mb_per_node, object_store_mb_per_node=object_store_mb_per_node,
        cluster_id=cluster_id, rendezvous=rendezvous, join_timeout_s=join_timeout,
        container=container, workdir=workdir, ssh_hosts=hosts, ssh_user=ssh_user,
        ssh_key=ssh_key, vm_instance_type=instance_type, vm_region=region, vm_image=image,
        vm_spot=spot or None, tls=tls or None,
    )  # fmt: skip


# auto_shortflags off: invoke would hand out -c, -r, … first come first served, and
# two options sharing an initial got a broken, empty one.
@task(help=invoke_help("deploy"), auto_shortflags=False)
def deploy(
    c: Context,
    config: str | None = None,
    target: str | None = None,
    nodes: int | None = None,
    cpus_per_node: int | None = None,
    gpus_per_node: int | None = None,
    memory_mb_per_node: int | None = None,
    object_store_mb_per_node: int | None = None,
    cluster_id: str | None = None,
    rendezvous: str | None = None,
    join_timeout: float | None = None,
    container: str | None = None,
    workdir: str | None = None,
    hosts: str | None = None,
    ssh_user: str | None = None,
    ssh_key: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    image: str | None = None,
    spot: bool = False,
    dashboard: bool = False,
    tls: bool = False,
    run: str | None = None,
    results_dir: str | None = None,
    env: str | None = None,
    mode: str | None = None,
    repeats: int | None = None,
    samples_per_cpu: int | None = None,
    keep: bool = False,
    dry_run: bool = False,
) -> None:
    """Bring a Ray cluster up on TARGET, run the workload, collect results, tear down."""
    _call(
        verbs.run_deploy, config=config, run=run, results_dir=results_dir,
        bench_envs=env.split(",") if env else None, bench_mode=mode, bench_repeats=repeats,
        bench_samples_per_cpu=samples_per_cpu, dry_run=dry_run, keep=keep,
        dashboard=dashboard or None,
        **_cluster_options(
            target, nodes, cpus_per_node, gpus_per_node, memory_mb_per_node,
            object_store_mb_per_node, cluster_id, rendezvous, join_timeout, container, workdir,
            hosts, ssh_user, ssh_key, instance_type, region, image, spot, tls,
        ),
    )  # fmt: skip


@task(help=invoke_help("up"), auto_shortflags=False)
def up(
    c: Context,
    config: str | None = None,
    target: str | None = None,
    nodes: int | None = None,
    cpus_per_node: int | None = None,
    gpus_per_node: int | None = None,
    memory_mb_per_node: int | None = None,
    object_store_mb_per_node: int | None = None,
    cluster_id: str | None = None,
    rendezvous: str | None = None,
    join_timeout: float | None = None,
    container: str | None = None,
    workdir: str | None = None,
    hosts: str | None = None,
    ssh_user: str | None = None,
    ssh_key: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    image: str | None = None,
    spot: bool = False,
    dashboard: bool = True,
    tls: bool = False,
) -> None:
    """Bring a cluster up and leave it serving; prints how to connect and submit jobs."""
    _call(
        verbs.run_up, config=config, dashboard=dashboard,
        **_cluster_options(
            target, nodes, cpus_per_node, gpus_per_node, memory_mb_per_node,
            object_store_mb_per_node, cluster_id, rendezvous, join_timeout, container, workdir,
            hosts, ssh_user, ssh_key, instance_type, region, image, spot, tls,
        ),
    )  # fmt: skip


@task(help=invoke_help("check"), auto_shortflags=False)
def check(
    c: Context,
    config: str | None = None,
    target: str | None = None,
    nodes: int | None = None,
    cpus_per_node: int | None = None,
    gpus_per_node: int | None = None,
    memory_mb_per_node: int | None = None,
    object_store_mb_per_node: int | None = None,
    cluster_id: str | None = None,
    rendezvous: str | None = None,
    join_timeout: float | None = None,
    container: str | None = None,
    workdir: str | None = None,
    hosts: str | None = None,
    ssh_user: str | None = None,
    ssh_key: str | None = None,
    instance_type: str | None = None,
    region: str | None = None,
    image: str | None = None,
    spot: bool = False,
    dashboard: bool = False,
    tls: bool = False,
) -> None:
    """Check that a deploy/up with these options can start (settings, credentials, image,
    instance types, rendezvous); creates nothing."""
    _call(
        verbs.run_check, config=config, dashboard=dashboard or None,
        **_cluster_options(
            target, nodes, cpus_per_node, gpus_per_node, memory_mb_per_node,
            object_store_mb_per_node, cluster_id, rendezvous, join_timeout, container, workdir,
            hosts, ssh_user, ssh_key, instance_type, region, image, spot, tls,
        ),
    )  # fmt: skip


@task(help=invoke_help("down"), auto_shortflags=False)
def down(c: Context, cluster_id: str | None = None) -> None:
    """Tear down a cluster started with `invoke up` (the only one up, if no id is given)."""
    _call(verbs.run_down, cluster_id=cluster_id)


@task(help=invoke_help("grow"), auto_shortflags=False)
def grow(
    c: Context, group: str, cluster_id: str | None = None, nodes: int = 1,
    wait_s: float | None = None, hosts: str | None = None,
) -> None:  # fmt: skip
    """Add nodes of a node group to a cluster started with `invoke up` (they join its head)."""
    _call(
        verbs.run_grow, group=group, nodes=nodes, cluster_id=cluster_id,
        wait_s=_number(float, "--wait-s", wait_s), hosts=hosts,
    )  # fmt: skip


@task(help=invoke_help("shrink"), auto_shortflags=False)
def shrink(c: Context, group: str, cluster_id: str | None = None, nodes: int | None = None) -> None:
    """Remove a node group's nodes (never the head's) from a cluster started with `invoke up`."""
    _call(
        verbs.run_shrink, group=group,
        nodes=_number(int, "--nodes", nodes), cluster_id=cluster_id,
    )  # fmt: skip


@task(
    auto_shortflags=False,
    help={
        "results": "directory of results (deploy.json + result.json per cluster)",
        "catalog": "price CSV that overrides/extends the shipped catalog",
        "config": "TOML file with [cost.onprem] settings",
        "out": "directory for report.md, report.html and the PNGs",
        "plan": "predict cost and wall time for --steps of --env instead",
        "steps": "plan: environment steps to collect (default 1e9)",
        "env": "plan: the env id, e.g. Humanoid-v5",
        "mode": "plan: count | collect (default: count if measured)",
        "target": "plan: targets, comma-separated (default: measured ones + aws,gcp,azure)",
        "basis": "plan: the measured target unmeasured instance types are scaled from",
        "sizes": "plan: node/instance counts, comma-separated",
    },
)
def compare(
    c: Context,
    results: str = "results",
    catalog: str | None = None,
    out: str = "compare-report",
    config: str | None = None,
    plan: bool = False,
    steps: str = "1e9",
    env: str | None = None,
    mode: str | None = None,
    target: str | None = None,
    basis: str | None = None,
    sizes: str = "1,2,4,8,16",
) -> None:
    """Throughput and cost of every measured run per env, cheapest first; --plan for N steps."""
    from syndeo.cli.compare import run_compare

    _call(
        run_compare, results=results, catalog=catalog, out=out, config=config, plan=plan,
        steps=steps, env=env, mode=mode, target=target, basis=basis, sizes=sizes,
    )  # fmt: skip


@task(
    help={
        "port": "port on 127.0.0.1 to serve the site on (default 8000)",
        "out": "build the site into this directory instead of serving it",
    },
    auto_shortflags=False,
)
def docs(c: Context, port: int = 8000, out: str | None = None) -> None:
    """Serve this documentation site (docs/, mkdocs.yml) locally, rebuilt on every change."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent
    mkdocs = [sys.executable, "-m", "mkdocs"]
    if out is not None:
        cmd = [*mkdocs, "build", "--strict", "--site-dir", str(Path(out).resolve())]
    else:
        address = f"127.0.0.1:{_number(int, '--port', port)}"
        cmd = [*mkdocs, "serve", "--strict", "--dev-addr", address]
    try:
        rc = subprocess.call(cmd, cwd=root)
    except KeyboardInterrupt:
        rc = 0
    if rc != 0:
        raise Exit(f"syndeo: error: mkdocs exited with status {rc}", code=rc)


ns = Collection(
    deploy, up, check, down, grow, shrink, bench, bench_bringup, report, compare, bench_rendezvous
)
ns.add_task(docs)
ns.add_task(image_tasks.build, name="build")
for _job_task in (
    job_tasks.submit,
    job_tasks.jobs,
    job_tasks.logs,
    job_tasks.cancel,
    job_tasks.fetch,
):
    ns.add_task(_job_task)
ns.add_collection(Collection("image", image_tasks.build, image_tasks.verify))
_slurm = Collection("slurm")
_slurm.add_task(slurm_tasks.slurm_cancel, name="cancel")  # type: ignore[arg-type]
# the local test cluster (testbeds/): up, down, and status (its nodes, then your jobs)
_slurm.add_task(testbed_tasks.slurm_up, name="up")
_slurm.add_task(testbed_tasks.slurm_down, name="down")  # type: ignore[arg-type]
_slurm.add_task(testbed_tasks.slurm_status, name="status")  # type: ignore[arg-type]
ns.add_collection(_slurm)
_aws_emulator = Collection("aws-emulator")
_aws_emulator.add_task(testbed_tasks.emulator_up, name="up")
_aws_emulator.add_task(testbed_tasks.emulator_down, name="down")  # type: ignore[arg-type]
ns.add_collection(_aws_emulator)
