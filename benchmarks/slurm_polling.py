"""Benchmark: how often a launcher asks slurmctld, in requests per minute (JSON).

On the local Slurm test cluster (root; started if down), run by the unprivileged CI
user with a directory of logging wrappers first on its PATH (testbeds/slurmrpc.py), so
every squeue/scontrol/sacct/sbatch/scancel/sinfo the launcher runs is counted:

* ``deploy``: a 3-node job whose workload runs about ``--run-s`` seconds; the window is
  the first sbatch to the deploy's exit;
* ``up_idle``: an ``up`` cluster with two node groups (head, cpu), then ``--idle-s``
  seconds of nothing but its watcher;
* ``down``: the ``down`` of that cluster (its wait for the jobs to end).

Measure before and after a change the same way, from each checkout::

    .venv/bin/python -m benchmarks.slurm_polling --label before \
        --out results/slurm-polling-before.json

``rpc_per_min`` counts every command that asks slurmctld; ``query_per_min`` the job-state
queries alone; ``min_gap_s`` is the shortest time between two of the launcher's calls.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from testbeds import slurmcluster, slurmrpc
from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock
from testbeds.users import CI_PYTHON, CI_USER, UserRun, as_user, give_to_ci_user

WORKLOAD = Path(__file__).resolve().parents[1] / "tests" / "slurm" / "workload.py"
GROUPS = '[[groups]]\nname = "head"\n[[groups]]\nname = "cpu"\n[[groups]]\nname = "more"\n'


def _run_root() -> tuple[UserRun, Path, dict[str, str]]:
    root = Path(f"/home/{CI_USER}/poll-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    workload = root / "workload.py"
    shutil.copy(WORKLOAD, workload)
    workload.chmod(0o644)
    bindir, log = slurmrpc.make_wrappers(root)
    return UserRun(root), log, {"PATH": slurmrpc.user_path(bindir)}


def bench_deploy(run_s: float) -> dict[str, Any]:
    run, log, env = _run_root()
    rounds = max(1, round(run_s / 30))
    body = (
        'target = "slurm"\nnodes = 3\ncpus_per_node = 1\njoin_timeout_s = 300\n'
        f'run = "python workload.py --tasks {3 * rounds} --seconds 30"\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n'
    )
    try:
        outcome = run.deploy(body, env)
        end = time.time()
        calls = slurmrpc.read_calls(log)
        start = next(c.at for c in calls if c.argv[0] == "sbatch")
        return {
            "exit_code": outcome.get("exit_code"),
            **slurmrpc.rate(calls, start, end),
            "calls": [[round(c.at - start, 2), *c.argv[:4]] for c in calls if not c.job],
        }
    finally:
        shutil.rmtree(run.root, ignore_errors=True)


def _syndeo(run: UserRun, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        as_user([str(CI_PYTHON), "-m", "syndeo", *args], {**run.env, **env}),
        capture_output=True,
        text=True,
        cwd=run.root,
        timeout=400,
        check=False,
    )


def bench_up(idle_s: float) -> dict[str, Any]:
    run, log, env = _run_root()
    cfg = run.config(
        'target = "slurm"\ncpus_per_node = 1\njoin_timeout_s = 60\n'
        '[slurm]\npartition = "debug"\ntime = "00:15:00"\n' + GROUPS
    )
    cid = f"slurm-{uuid.uuid4().hex[:8]}"
    try:
        up = _syndeo(run, env, "up", "--config", str(cfg), "--cluster-id", cid)
        if up.returncode != 0:
            return {"error": up.stderr[-2000:]}
        idle_from = time.time()
        time.sleep(idle_s)
        idle_to = time.time()
        down = _syndeo(run, env, "down", "--cluster-id", cid)
        down_end = time.time()
        calls = slurmrpc.read_calls(log)
        return {
            "up_idle": slurmrpc.rate(calls, idle_from, idle_to),
            "down": {"rc": down.returncode, **slurmrpc.rate(calls, idle_to, down_end)},
            "calls": [[round(c.at - idle_from, 2), *c.argv[:4]] for c in calls if not c.job],
        }
    finally:
        _syndeo(run, env, "down", "--cluster-id", cid)  # a failed run leaves nothing queued
        shutil.rmtree(run.root, ignore_errors=True)


def _commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    return proc.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--label", default="")
    ap.add_argument("--run-s", type=float, default=90.0)
    ap.add_argument("--idle-s", type=float, default=150.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        ours = not slurmcluster.is_up()
        cluster = slurmcluster.up(nodes=3, cpus_per_node=4)
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            report = {
                "label": args.label,
                "commit": _commit(),
                "deploy": bench_deploy(args.run_s),
                "up": bench_up(args.idle_s),
                "at": time.time(),
            }
        finally:
            if ours:
                slurmcluster.down()
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
