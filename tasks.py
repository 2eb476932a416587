"""invoke front end: thin typed tasks over syndeo's library functions.

invoke deploy --target local --nodes 3        # cluster up, benchmark, results, teardown
invoke deploy --run "python train.py"         # your own Ray program instead
invoke up / invoke down                        # a long-lived cluster
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from benchmarks.tasks import bench_bringup, bench_rendezvous
from syndeo.cli import image_tasks, job_tasks, slurm_tasks, verbs
from syndeo.cli.bench_tasks import bench, report
from syndeo.cli.status import run_status
from syndeo.cli.verb_tasks import exit_on_error, number, verb_task
from testbeds import tasks as testbed_tasks


def _call(fn: Callable[..., Any], **options: Any) -> None:
    with exit_on_error():
        fn(**options)


# The cluster verbs: their options come from the table in syndeo/cli/options.py.
deploy = verb_task(
    "deploy",
    verbs.run_deploy,
    "Bring a Ray cluster up on TARGET, run the workload, collect results, tear down.",
)
up = verb_task(
    "up",
    verbs.run_up,
    "Bring a cluster up and leave it serving; prints how to connect and submit jobs.",
    defaults={"dashboard": True},
)
check = verb_task(
    "check",
    verbs.run_check,
    "Check that a deploy/up with these options can start (settings, credentials, image, "
    "instance types, rendezvous); creates nothing.",
)
down = verb_task(
    "down",
    verbs.run_down,
    "Tear down a cluster started with `invoke up` (the only one up, if no id is given).",
)
watch = verb_task(
    "watch",
    verbs.run_watch,
    "Start the watcher of a cluster started with `invoke up` again after it died "
    "(it applies autoscaling, autostop and replacements).",
)
grow = verb_task(
    "grow",
    verbs.run_grow,
    "Add nodes of a node group to a cluster started with `invoke up` (they join its head).",
)
shrink = verb_task(
    "shrink",
    verbs.run_shrink,
    "Remove a node group's nodes (never the head's) from a cluster started with `invoke up`.",
)
status = verb_task(
    "status",
    run_status,
    "Every cluster of yours on this machine: nodes per group (now, min..max), age, state, "
    "jobs running, idle for, autostop in, and on clouds the cost so far and per hour.",
)


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
        "target": "plan: targets, comma-separated (default: measured ones + aws,gcp,azure,alibaba)",
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
        run_compare,
        results=results,
        catalog=catalog,
        out=out,
        config=config,
        plan=plan,
        steps=steps,
        env=env,
        mode=mode,
        target=target,
        basis=basis,
        sizes=sizes,
    )


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
        address = f"127.0.0.1:{number(int, '--port', port)}"
        cmd = [*mkdocs, "serve", "--strict", "--dev-addr", address]
    try:
        rc = subprocess.call(cmd, cwd=root)
    except KeyboardInterrupt:
        rc = 0
    if rc != 0:
        raise Exit(f"syndeo: error: mkdocs exited with status {rc}", code=rc)


ns = Collection(
    deploy,
    up,
    check,
    down,
    watch,
    grow,
    shrink,
    bench,
    bench_bringup,
    report,
    compare,
    bench_rendezvous,
)
ns.add_task(docs)
ns.add_task(status)
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
