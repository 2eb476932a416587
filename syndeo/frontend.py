"""Command-line verbs over :mod:`syndeo.deploy`, shared by ``syndeo …`` and ``invoke …``.

Both front ends pass the same keyword names (the :class:`DeployConfig` fields) to
:func:`config_from`, so an option means the same thing wherever it is typed.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text

from syndeo.config import DeployConfig, load_config
from syndeo.deploy import Outcome, UpInfo, deploy, down, plan, raise_for_outcome, up
from syndeo.ui import Ui

CLUSTER_OPTIONS: dict[str, dict[str, Any]] = {
    "target": {"help": "local | slurm | ssh | aws | gcp | azure (default: local)"},
    "nodes": {"type": int, "help": "number of nodes (default 2)"},
    "cpus_per_node": {"type": int, "help": "CPUs each node offers to Ray (default 1)"},
    "gpus_per_node": {"type": int, "help": "GPUs each node offers to Ray (default 0)"},
    "memory_mb_per_node": {"type": int, "help": "memory each node offers to Ray, MiB"},
    "object_store_mb_per_node": {"type": int, "help": "object store per node, MiB"},
    "cluster_id": {"help": "cluster id (default: generated)"},
    "rendezvous": {"help": "file:///dir, s3://bucket/prefix, gs://…, az://… (default per target)"},
    "join_timeout_s": {"type": float, "help": "deadline for all nodes to join, seconds"},
    "container": {"type": Path, "help": "run every node in this Apptainer image (.sif)"},
    "workdir": {"type": Path, "help": "working directory of the workload (default: here)"},
    "ssh_hosts": {"help": "ssh: comma-separated hosts, one node each (the first is the head)"},
    "ssh_user": {"help": "ssh: login on every host (default: you)"},
    "ssh_key": {"help": "ssh: private key file (default: the ssh agent)"},
    "vm_instance_type": {"help": "aws/gcp/azure: VM type, e.g. c7i.2xlarge"},
    "vm_region": {"help": "aws/gcp/azure: region (azure: location)"},
    "vm_image": {"help": "aws/gcp/azure: the Packer-baked VM image id"},
    "vm_spot": {"action": "store_const", "const": True, "help": "aws/gcp/azure: spot VMs"},
    "dashboard": {
        "action": argparse.BooleanOptionalAction,
        "help": "Ray's dashboard on the head's 127.0.0.1 (default: off for deploy, on for up)",
    },
}
RUN_OPTIONS: dict[str, dict[str, Any]] = {
    "run": {
        "help": 'your own workload, e.g. "python train.py --epochs 3" (default: benchmark); '
        "no secrets in it (it is recorded in scripts, state and deploy.json)"
    },
    "results_dir": {"type": Path, "help": "where results are written (default ./results)"},
    "bench_envs": {"action": "append", "help": "benchmark environment id (repeatable)"},
    "bench_mode": {"help": "benchmark mode: count | collect"},
    "bench_repeats": {"type": int, "help": "benchmark repeats"},
    "bench_samples_per_cpu": {"type": int, "help": "benchmark samples per CPU"},
}


def config_from(config: str | Path | None = None, **options: Any) -> DeployConfig:
    return load_config(Path(config) if config else None, **options)


def print_outcome(outcome: Outcome, ui: Ui) -> None:
    t = outcome.timings
    # The message is the head's (its done record): text, never markup.
    ui.info(
        Text.assemble(
            (outcome.cluster_id, "bold"),
            f": {outcome.message}; all nodes joined after "
            f"{t.get('all_joined_s', float('nan')):.1f} s, finished after "
            f"{t.get('teardown_done_s', float('nan')):.1f} s (torn down)",
        )
    )
    if outcome.lost_ranks:
        ui.info(Text(f"nodes lost during the run: ranks {outcome.lost_ranks}", style="yellow"))
    if outcome.result_path is not None:
        _print_result_table(outcome.result_path, ui)
        ui.info(f"result: {outcome.result_path}")


def _print_result_table(path: Path, ui: Ui) -> None:
    try:
        from syndeo.bench.report import result_table  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return
    try:
        table = result_table(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError):
        return  # not a benchmark result (a user's own workload): nothing to tabulate
    if table is not None:
        ui.out.print(table)


def run_deploy(
    ui: Ui | None = None, dry_run: bool = False, keep: bool = False, **options: Any
) -> Outcome | None:
    ui = ui or Ui()
    if dry_run:
        ui.out.print(plan(config_from(**options)), end="", highlight=False, markup=False)
        return None
    outcome = deploy(config_from(**options), ui, keep=keep)
    print_outcome(outcome, ui)
    raise_for_outcome(outcome)
    return outcome


def run_up(ui: Ui | None = None, **options: Any) -> UpInfo:
    ui = ui or Ui()
    info = up(config_from(**options), ui)
    dash = info.dashboard_url.split("//")[-1]
    port = dash.rsplit(":", 1)[-1] if dash else "<port>"
    ui.out.print(
        f"Cluster {info.cluster_id} is up: {info.nodes} nodes, head at {info.address}\n"
        f"  Connect (plain ray.init() then works):\n"
        f"    export RAY_ADDRESS={info.address} RAY_AUTH_MODE=token "
        f"RAY_AUTH_TOKEN_PATH={info.token_path}\n"
        f"  Submit a job:  ray job submit --address http://{dash or '127.0.0.1:<port>'} "
        f"-- python my_script.py   (with the same RAY_AUTH_* variables)\n"
        f"  Dashboard (bound to the head's 127.0.0.1 only): "
        f"ssh -N -L 8265:127.0.0.1:{port} <head host>, then http://127.0.0.1:8265\n"
        f"  Stop it:  invoke down --cluster-id {info.cluster_id}",
        highlight=False,
        markup=False,  # addresses and paths the head published: text, never markup
    )
    return info


def run_down(cluster_id: str | None = None, ui: Ui | None = None) -> str:
    ui = ui or Ui()
    cid = down(cluster_id, ui)
    ui.info(f"cluster {cid} is down")
    return cid


def run_grow(
    group: str, nodes: int, cluster_id: str | None = None, wait_s: float | None = None,
    ui: Ui | None = None, hosts: str | None = None,
) -> str:  # fmt: skip
    from syndeo.grow import grow

    names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
    return grow(cluster_id, group, nodes, wait_s, ui, hosts=names)


def run_shrink(
    group: str, nodes: int | None = None, cluster_id: str | None = None, ui: Ui | None = None
) -> list[str]:
    from syndeo.grow import shrink

    return shrink(cluster_id, group, nodes, ui)


def _add_options(p: argparse.ArgumentParser, options: dict[str, dict[str, Any]]) -> None:
    for name, spec in options.items():
        flag = "--" + name.replace("_", "-").removeprefix("bench-").removeprefix("vm-")
        flag = {"bench_envs": "--env", "ssh_hosts": "--hosts"}.get(name, flag)
        p.add_argument(flag, dest=name, default=None, **spec)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("deploy", help="bring a cluster up, run the workload, tear it down")
    p.add_argument("--config", help="TOML file with settings (options override it)")
    p.add_argument(
        "--dry-run", action="store_true", help="print what would be launched; start nothing"
    )
    p.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    _add_options(p, CLUSTER_OPTIONS)
    _add_options(p, RUN_OPTIONS)
    p.set_defaults(func=partial(_call, run_deploy))

    p = sub.add_parser("up", help="bring a cluster up and leave it serving")
    p.add_argument("--config", help="TOML file with settings (options override it)")
    _add_options(p, CLUSTER_OPTIONS)
    p.set_defaults(func=partial(_call, run_up))

    p = sub.add_parser("down", help="tear down a cluster started with `up`")
    p.add_argument("--cluster-id", default=None)
    p.set_defaults(func=partial(_call, run_down))

    p = sub.add_parser("grow", help="add nodes of a node group to a cluster started with `up`")
    p.add_argument("--cluster-id", default=None)
    p.add_argument("--group", required=True, help="the node group ([[groups]] name)")
    p.add_argument("--nodes", type=int, default=1, help="how many nodes to add (default 1)")
    p.add_argument("--wait-s", type=float, default=None, help="wait this long for them to join")
    p.add_argument("--hosts", default=None, help="ssh: the new nodes' machines, comma-separated")
    p.set_defaults(func=partial(_call, run_grow))

    p = sub.add_parser("shrink", help="remove a node group's added nodes from an `up` cluster")
    p.add_argument("--cluster-id", default=None)
    p.add_argument("--group", required=True, help="the node group ([[groups]] name)")
    p.add_argument("--nodes", type=int, default=None, help="at least this many (default: all)")
    p.set_defaults(func=partial(_call, run_shrink))


def _call(fn: Any, args: argparse.Namespace) -> int:
    options = {k: v for k, v in vars(args).items() if k not in ("func", "command")}
    fn(**options)
    return 0  # failures raise SyndeoError, which the CLI turns into its exit code
