"""Clusters that follow demand: how fast a node Ray asks for joins, against a manual
``grow`` of one node on the same cluster, and how soon an idle node goes.

    python -m benchmarks.autoscale [--target local|slurm] [--out x.json]
    python -m benchmarks.autoscale --fault 120 [--target slurm|aws] [--out x.json]

One ``up`` cluster (bare nodes, file rendezvous, a fresh $SYNDEO_HOME) with two groups
beside the head: ``auto`` follows demand (max_nodes 1, idle timeout 10 s) and ``manual``
is declared empty for ``grow``.  ``--target slurm`` runs it on the local Slurm test
cluster (root; started if down) as its unprivileged CI user, each group's node a
one-node job of its own.  In the same run:

- demand: a job's placement group that needs a second node; from the placement group's
  creation to its being ready (the node asked for, started by the watcher, joined);
- manual: ``syndeo grow --group manual --nodes 1 --wait-s``, its wall time (the
  command, the start, the join);
- release: from the job's end to the watcher's "let go" of the idle node, against the
  idle timeout (goal: within it + 30 s);
- the fault case (``--fault SECONDS``, Slurm, root): the partition set INACTIVE while
  a job's placement group waits for a node of ``auto``; for SECONDS, what the
  launcher asks of slurmctld (each call, through logging wrappers on the CI user's
  PATH), the sbatch calls among them against the goal (at most 8 in 2 minutes), and
  the refusals the watcher logged; ``--target aws``: the same on the emulated AWS
  with no zone of capacity, counting the cloud API requests instead
  (:mod:`benchmarks.cloud_fault`);
- the store: the status record with and without the signed demand in it (bytes).  The
  scaler has no store handle at all (syndeo/launcher/autoscale.py: it is handed the
  status the watcher reads anyway), so it adds no request; that is by construction and
  not counted here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cli import syndeo as _syndeo

IDLE_S = 10
CONFIG = f"""\
idle_timeout_s = {IDLE_S}
[[groups]]
name = "auto"
max_nodes = 1
[[groups]]
name = "manual"
nodes = 0
"""
# Slurm: each group's node a job of its own, on a bed node of its own (two Ray nodes of
# one cluster on one bed node would share its address).
ALONE = 'slurm = { extra_sbatch = ["--exclusive"] }'
SLURM_CONFIG = f"""\
target = "slurm"
cpus_per_node = 1
join_timeout_s = 120
idle_timeout_s = {IDLE_S}
[slurm]
partition = "debug"
time = "00:15:00"
[[groups]]
name = "head"
{ALONE}
[[groups]]
name = "auto"
max_nodes = 1
{ALONE}
[[groups]]
name = "manual"
nodes = 0
{ALONE}
"""
# The fault case: a job whose placement group waits for a node the partition cannot
# start (it is cancelled with the cluster), and the goal for what that may cost.
WAIT_JOB = """\
import ray
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=3600)
"""
FAULT_GOAL = 8  # sbatch calls at most in 2 minutes of unmet demand, every one refused
# Runs ``syndeo ARGS`` in a directory to the end: (its wall time, its output).
Runner = Callable[..., tuple[float, str]]
JOB = """\
import time, ray
from ray.util.placement_group import placement_group
ray.init()
began = time.monotonic()
pg = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=300)
print("DEMAND_S", round(time.monotonic() - began, 2), flush=True)
ray.util.remove_placement_group(pg)
print("ENDED_AT", time.time(), flush=True)
"""


def _released_at(log: Path, timeout_s: float) -> float:
    """The epoch of the watcher's first "let go" line (its log has local wall-clock times)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if "let go" in line:
                return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
        time.sleep(0.5)
    raise SystemExit(f"no node let go within {timeout_s:.0f} s: {log.read_text()[-2000:]}")


def _status_bytes(cid: str) -> dict[str, int]:
    from syndeo.launcher.state import load_launched
    from syndeo.rendezvous import open_rendezvous

    st = open_rendezvous(load_launched(cid).rendezvous, cid).read_status()
    assert st is not None and st.demand is not None
    return {
        "with_demand": len(st.model_dump_json()),
        "without_demand": len(st.model_copy(update={"demand": None}).model_dump_json()),
    }


def measure(work: Path, target: str, run: Runner = _syndeo) -> dict[str, Any]:
    cid = "bscale"
    (work / "scale.toml").write_text(SLURM_CONFIG if target == "slurm" else CONFIG)
    (work / "job.py").write_text(JOB)
    up_s, _ = run("up", "--config", "scale.toml", "--cluster-id", cid, cwd=work)
    try:
        _, out = run("submit", "--cluster-id", cid, "--follow", "--", "python", "job.py", cwd=work)
        demand_s = float(re.search(r"DEMAND_S (\S+)", out).group(1))  # type: ignore[union-attr]
        ended = float(re.search(r"ENDED_AT (\S+)", out).group(1))  # type: ignore[union-attr]
        log = Path(os.environ["SYNDEO_HOME"]) / "clusters" / cid / "watch.log"
        release_s = round(_released_at(log, 300) - ended, 1)
        store = _status_bytes(cid)
        manual_s, _ = run(
            "grow", "--cluster-id", cid, "--group", "manual", "--wait-s", "300", cwd=work
        )
    finally:
        run("down", "--cluster-id", cid, cwd=work)
    return {
        "target": target,
        "up_s": up_s,
        "demand_to_joined_s": demand_s,
        "manual_grow_s": manual_s,
        "demand_vs_manual": round(demand_s / manual_s, 2),
        "goal_demand_vs_manual": 1.2,
        "idle_timeout_s": IDLE_S,
        "release_after_idle_s": release_s,
        "release_within_goal": release_s <= IDLE_S + 30,
        "status_record_bytes": store,
    }


def _local(tmp: Path) -> dict[str, Any]:
    os.environ["SYNDEO_HOME"] = str(tmp / "home")
    work = tmp / "work"
    work.mkdir()
    return measure(work, "local")


def _slurm() -> dict[str, Any]:
    """The same, on the local Slurm test cluster, as its CI user (root starts the bed)."""
    from testbeds import slurmcluster
    from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock
    from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user

    user = UserRun(Path(f"/home/{CI_USER}/bscale-{os.getpid()}"))

    def run(*args: str, cwd: Path) -> tuple[float, str]:
        for path in cwd.iterdir():  # what measure() wrote, for the user to read
            give_to_ci_user(path)
        argv = as_user([str(CI_PYTHON), "-m", "syndeo", *args], user.env)
        return _syndeo(*args, cwd=cwd, argv=argv)

    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        ours = not slurmcluster.is_up()
        os.environ["SLURM_CONF"] = str(slurmcluster.up(nodes=3, cpus_per_node=4).conf)
        user.root.mkdir(mode=0o700)
        try:
            give_to_ci_user(user.root)
            (work := user.root / "work").mkdir()
            give_to_ci_user(work)
            os.environ["SYNDEO_HOME"] = user.env["SYNDEO_HOME"]  # for the status read
            return measure(work, "slurm", run)
        finally:
            user.remove()  # its dir and its SYNDEO_HOME
            if ours:
                slurmcluster.down()


def _set_partition(name: str, state: str) -> None:
    """An administrator's ``scontrol update`` of the bed's partition (as root)."""
    import subprocess

    subprocess.run(["scontrol", "update", f"PartitionName={name}", f"State={state}"], check=True)


def _fault_window(run: Runner, work: Path, cid: str, seconds: float) -> tuple[float, float]:
    """The partition INACTIVE while a job waits for a node of ``auto``: (start, end)."""
    _set_partition("debug", "INACTIVE")
    try:
        start = time.time()
        run("submit", "--cluster-id", cid, "--", "python", "wait.py", cwd=work)
        time.sleep(seconds)
        return start, time.time()
    finally:
        _set_partition("debug", "UP")


def fault(seconds: float) -> dict[str, Any]:
    """The fault case on the local Slurm test cluster: the partition set INACTIVE (every
    sbatch refused) while a placement group waits for a second node, for ``seconds``;
    what the launcher asked of slurmctld meanwhile (logging wrappers first on the CI
    user's PATH, testbeds/slurmrpc.py) and what its watcher said."""
    from testbeds import slurmcluster, slurmrpc
    from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock
    from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user

    user = UserRun(Path(f"/home/{CI_USER}/bfault-{os.getpid()}"))
    cid = "bfault"
    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        ours = not slurmcluster.is_up()
        os.environ["SLURM_CONF"] = str(slurmcluster.up(nodes=3, cpus_per_node=4).conf)
        user.root.mkdir(mode=0o700)
        try:
            give_to_ci_user(user.root)
            bindir, calls = slurmrpc.make_wrappers(user.root)
            env = {**user.env, "PATH": slurmrpc.user_path(bindir)}
            (work := user.root / "work").mkdir()
            (work / "scale.toml").write_text(SLURM_CONFIG)
            (work / "wait.py").write_text(WAIT_JOB)
            for path in (work, *work.iterdir()):
                give_to_ci_user(path)

            def run(*args: str, cwd: Path) -> tuple[float, str]:
                return _syndeo(
                    *args, cwd=cwd, argv=as_user([str(CI_PYTHON), "-m", "syndeo", *args], env)
                )

            run("up", "--config", "scale.toml", "--cluster-id", cid, cwd=work)
            log = Path(user.env["SYNDEO_HOME"]) / "clusters" / cid / "watch.log"
            try:
                start, end = _fault_window(run, work, cid, seconds)
                said = log.read_text()
            finally:
                run("down", "--cluster-id", cid, cwd=work)
            return _fault_result(slurmrpc.read_calls(calls), start, end, said)
        finally:
            user.remove()  # its dir and its SYNDEO_HOME
            if ours:
                slurmcluster.down()


def _fault_result(calls: list[Any], start: float, end: float, said: str) -> dict[str, Any]:
    from testbeds import slurmrpc

    cost = slurmrpc.rate(calls, start, end)
    sbatch = sum(1 for c in calls if start <= c.at <= end and not c.job and c.argv[0] == "sbatch")
    minutes = (end - start) / 60
    return {
        "case": "fault",
        "target": "slurm",
        "fault": "partition INACTIVE while a placement group waits for a second node",
        "fault_s": round(end - start, 1),
        "slurmctld": cost,
        "sbatch_calls": sbatch,
        "sbatch_per_min": round(sbatch / minutes, 2),
        "goal_sbatch_per_2_min": FAULT_GOAL,
        "within_goal": sbatch / minutes * 2 <= FAULT_GOAL,
        "refusals_logged": said.count("could not follow demand"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", choices=["local", "slurm", "aws"])
    parser.add_argument(
        "--fault",
        type=float,
        metavar="SECONDS",
        help="the fault case instead, for SECONDS: on Slurm (the default) the partition "
        "INACTIVE, on aws (the emulated AWS) no zone with capacity",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.target == "aws" and args.fault is None:
        parser.error("--target aws measures the fault case only: add --fault SECONDS")
    if args.fault is not None and args.target == "local":
        parser.error("the fault case runs on slurm or aws, not local")
    if args.target == "aws":
        from benchmarks import cloud_fault

        result = cloud_fault.fault(args.fault)
    elif args.fault is not None:
        result = fault(args.fault)
    elif args.target == "slurm":
        result = _slurm()
    else:
        with tempfile.TemporaryDirectory(prefix="bscale-") as tmp:
            result = _local(Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
