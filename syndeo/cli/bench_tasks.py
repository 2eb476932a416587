"""invoke tasks for the benchmark; the project's tasks.py adds them.

invoke bench                                   # standalone: a private local Ray
invoke bench --target local --nodes 2          # on a syndeo cluster via syndeo.launcher.deploy
invoke report --results-dir results            # tables, PNGs and report.md
"""

from __future__ import annotations

import shlex
from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.bench.argv import bench_argv
from syndeo.cli.options import invoke_help
from syndeo.core.errors import SyndeoError

_CLUSTER_HELP = invoke_help("deploy")


@task(
    auto_shortflags=False,
    help={
        "target": "run on a syndeo cluster (local | slurm | aws | gcp | azure); default standalone",
        "nodes": _CLUSTER_HELP["nodes"],
        "cpus_per_node": _CLUSTER_HELP["cpus_per_node"],
        "container": _CLUSTER_HELP["container"],
        "results_dir": _CLUSTER_HELP["results_dir"],
        "samples_per_cpu": "samples per CPU in each repeat (paper: 1000)",
        "repeats": "repeats per configuration (paper: 4)",
        "envs_per_actor": "vectorised environments per actor",
        "local_limit": "also measure one process's own limit, for the ratio (default: on)",
        "env": "'all' or comma-separated names/ids, e.g. CartPole,Ant-v4",
        "mode": "count and/or collect, comma-separated",
        "protocol": "paper (1000 x CPUs, 4 repeats) | steady",
        "workers": "actor counts to sweep, e.g. 1,2 (default: one per CPU)",
        "rllib": "also measure the RLlib PPO sampling baseline (needs syndeo[rllib])",
        "out": "result JSON (standalone; default results/bench-<time>.json)",
    },
)
def bench(
    c: Context,
    target: str | None = None,
    nodes: int | None = None,
    cpus_per_node: int | None = None,
    container: str | None = None,
    results_dir: str | None = None,
    env: str = "all",
    mode: str = "count",
    protocol: str = "paper",
    samples_per_cpu: int = 1000,
    repeats: int = 4,
    envs_per_actor: int = 16,
    workers: str | None = None,
    rllib: bool = False,
    local_limit: bool = True,
    out: str | None = None,
) -> None:
    """Measure rollout throughput (the paper's benchmark) standalone or on a cluster."""
    how = (env, mode, protocol, samples_per_cpu, repeats, envs_per_actor, workers, rllib)
    try:
        if target is None:
            _bench_here(how, local_limit, results_dir, out)
            return
        from syndeo.cli.verbs import run_deploy

        argv = bench_argv(*how, local_limit)
        run_deploy(
            target=target,
            nodes=nodes,
            cpus_per_node=cpus_per_node,
            container=container,
            results_dir=results_dir,
            run=shlex.join(argv),
        )
    except SyndeoError as e:
        raise Exit(f"syndeo: error: {e}", code=e.exit_code) from None


def _bench_here(
    how: tuple[str, str, str, int, int, int, str | None, bool],
    local_limit: bool,
    results_dir: str | None,
    out: str | None,
) -> None:
    """The benchmark standalone, on this machine: its result JSON in ``out``."""
    from syndeo.bench.cli import main
    from syndeo.bench.manifest import now_iso

    out = out or str(Path(results_dir or "results") / f"bench-{now_iso()}.json")
    rc = main(bench_argv(*how, local_limit, out)[3:])
    if rc:
        raise Exit(code=rc)


@task(
    auto_shortflags=False,
    help={"results_dir": "directory of result JSONs", "out": "output directory"},
)
def report(c: Context, results_dir: str = "results", out: str = "bench-report") -> None:
    """Render tables, PNG plots and report.md from a directory of benchmark results."""
    from syndeo.bench.report import render_report

    try:
        page = render_report(Path(results_dir), Path(out))
    except SyndeoError as e:
        raise Exit(f"syndeo: error: {e}", code=e.exit_code) from None
    print(f"report: {page}")
