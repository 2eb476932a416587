"""The cluster verbs of both command lines, over the Python API (:mod:`syndeo.api`).

Both front ends pass the same keyword names (the DeployConfig fields), so an option
means the same thing wherever it is typed, and the same in Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text

from syndeo import api
from syndeo.launcher.config import DeployConfig, load_config
from syndeo.launcher.deploy import Outcome, UpInfo, raise_for_outcome
from syndeo.launcher.ui import Ui


def config_from(config: str | Path | None = None, **options: Any) -> DeployConfig:
    return load_config(Path(config) if config else None, **options)


def print_outcome(outcome: Outcome, ui: Ui) -> None:
    t = outcome.timings
    # From the launch, on every target: on a VM target the nodes have often joined by
    # the time the apply returns, so the time after it (all_joined_s) reads 0.0 s.
    joined = t.get("launch_to_joined_s", t.get("all_joined_s", float("nan")))
    # The message is the head's (its done record): text, never markup.
    ui.info(
        Text.assemble(
            (outcome.cluster_id, "bold"),
            f": {outcome.message}; all nodes joined {joined:.1f} s after the launch, "
            f"finished after {t.get('teardown_done_s', float('nan')):.1f} s ({outcome.teardown})",
        )
    )
    if outcome.attempt:
        # Restarted after a lost head (or a requeued Slurm job): which run this was.
        ui.info(Text(f"finished on attempt {outcome.attempt} (the first is 0)", style="yellow"))
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
        ui.out.print(api.plan(**options), end="", highlight=False, markup=False)
        return None
    outcome = api.deploy(ui=ui, keep=keep, check=False, **options)
    print_outcome(outcome, ui)
    raise_for_outcome(outcome)
    return outcome


def run_up(ui: Ui | None = None, **options: Any) -> UpInfo:
    ui = ui or Ui()
    info = api.up(ui=ui, **options).info
    assert info is not None  # started here
    dash = info.dashboard_url.split("//")[-1]
    port = dash.rsplit(":", 1)[-1] if dash else "<port>"
    # With --tls the cluster takes only clients with a certificate its CA signed: the
    # launcher's (in the cluster's dir, 0600) goes on the same line.
    tls = "".join(f" {k}={v}" for k, v in info.tls_env.items())
    ui.out.print(
        f"Cluster {info.cluster_id} is up: {info.nodes} nodes, head at {info.address}"
        f"{' (Ray TLS on)' if tls else ''}\n"
        f"  Connect (plain ray.init() then works):\n"
        f"    export RAY_ADDRESS={info.address} RAY_AUTH_MODE=token "
        f"RAY_AUTH_TOKEN_PATH={info.token_path}{tls}\n"
        f"  Submit a job (from anywhere that can reach the rendezvous):\n"
        f"    syndeo submit --cluster-id {info.cluster_id} --follow -- python my_script.py\n"
        f"    then: syndeo jobs | syndeo logs JOB --follow | syndeo cancel JOB | "
        f"syndeo fetch JOB\n"
        f"  Dashboard (bound to the head's 127.0.0.1 only): "
        f"ssh -N -L 8265:127.0.0.1:{port} <head host>, then http://127.0.0.1:8265\n"
        f"  Stop it:  syndeo down --cluster-id {info.cluster_id}",
        highlight=False,
        markup=False,  # addresses and paths the head published: text, never markup
    )
    return info


def run_check(ui: Ui | None = None, **options: Any) -> list[str]:
    """Whether a deploy/up with these options can start; creates nothing."""
    from syndeo.launcher.preflight import check_deployment

    ui = ui or Ui()
    found = check_deployment(config_from(**options))
    for line in found:
        # Cloud-provided names (identities, images): text, never markup.
        ui.out.print(f"ok: {line}", highlight=False, markup=False)
    return found


def run_down(cluster_id: str | None = None, ui: Ui | None = None) -> str:
    ui = ui or Ui()
    cluster = api.Cluster.attach(cluster_id)
    cluster.down(ui)
    ui.info(f"cluster {cluster.id} is down")
    return cluster.id


def run_watch(cluster_id: str | None = None, ui: Ui | None = None) -> str:
    from syndeo.launcher.watch import restart

    return restart(cluster_id, ui or Ui())


def run_grow(
    group: str,
    nodes: int,
    cluster_id: str | None = None,
    wait_s: float | None = None,
    ui: Ui | None = None,
    hosts: str | None = None,
) -> None:
    names = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
    api.Cluster.attach(cluster_id).grow(group, nodes, wait_s, names, ui or Ui())


def run_shrink(
    group: str, nodes: int | None = None, cluster_id: str | None = None, ui: Ui | None = None
) -> list[str]:
    return api.Cluster.attach(cluster_id).shrink(group, nodes, ui or Ui())
