"""Benchmark: node groups on Slurm as one heterogeneous job vs one job per group (JSON).

On the local Slurm test cluster with its ``gpu`` partition (root; started if down),
jobs submitted by the unprivileged CI user, the two shapes interleaved so machine
noise hits both alike.  Each run starts 3 components -- head (debug, exclusive),
cpu (debug, exclusive), gpu (gpu partition, gres gpu:1) -- whose single task writes
its start time; measured from just before the first ``sbatch``:

* ``all_started_s``: every component's task has started (what Ray bring-up waits on);
* ``head_started_busy_gpu_s``: the same, for the head's task, while another job
  holds the gpu node for ``--busy-s`` seconds (a group that cannot start yet);
* ``cancel_one``: whether cancelling the gpu component/job leaves the others running.

    .venv/bin/python -m benchmarks.slurm_groups --runs 3 --out results/slurm-groups.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from syndeo.launcher.targets.slurm import commands
from testbeds import slurmcluster
from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock
from testbeds.users import CI_USER, as_user, give_to_ci_user

COMPONENTS = [
    ["--partition=debug", "--exclusive"],
    ["--partition=debug", "--exclusive"],
    ["--partition=gpu", "--gres=gpu:1"],
]
STAMP = "date +%s.%N > {dir}/start.$SLURM_JOB_ID.$SLURM_PROCID; sleep {sleep}"


def _sbatch(path: Path) -> str:
    proc = subprocess.run(
        as_user(["sbatch", "--parsable", str(path)]), capture_output=True, text=True, check=True
    )
    return proc.stdout.strip().split(";")[0]


def _script(path: Path, body: str) -> Path:
    path.write_text(body)
    give_to_ci_user(path)
    return path


def _header(opts: list[str]) -> str:
    lines = ["#SBATCH --nodes=1", "#SBATCH --ntasks=1", "#SBATCH --time=00:05:00", *opts]
    return "\n".join(ln if ln.startswith("#") else f"#SBATCH {ln}" for ln in lines)


def separate(d: Path, sleep: float) -> list[str]:
    ids = []
    for i, opts in enumerate(COMPONENTS):
        body = (
            f"#!/bin/bash\n#SBATCH --job-name=bg-sep\n#SBATCH --output={d}/o-%j.txt\n"
            f"{_header(opts)}\nsrun bash -c '{STAMP.format(dir=d, sleep=sleep)}'\n"
        )
        ids.append(_sbatch(_script(d / f"sep-{i}.sbatch", body)))
    return ids


def hetjob(d: Path, sleep: float) -> list[str]:
    parts = [_header(opts) for opts in COMPONENTS]
    body = (
        f"#!/bin/bash\n#SBATCH --job-name=bg-het\n#SBATCH --output={d}/o-%j.txt\n"
        + "\n#SBATCH hetjob\n".join(parts)
        + f"\nsrun --het-group=0,1,2 bash -c '{STAMP.format(dir=d, sleep=sleep)}'\n"
    )
    return [_sbatch(_script(d / "het.sbatch", body))]


def _stamps(d: Path) -> list[float]:
    out = []
    for f in d.glob("start.*"):
        try:
            out.append(float(f.read_text().strip()))
        except ValueError:
            continue
    return out


def _wait_stamps(d: Path, count: int, timeout: float = 180) -> list[float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stamps = _stamps(d)
        if len(stamps) >= count:
            return stamps
        time.sleep(0.02)
    raise RuntimeError(f"only {len(_stamps(d))} of {count} components started in {d}")


def _cancel_wait(ids: list[str]) -> None:
    for j in ids:
        subprocess.run(["scancel", j], check=False)
    for j in ids:
        while not commands.job_info(j).finished:
            time.sleep(0.2)


def _fresh_dir(tag: str) -> Path:
    d = Path(f"/home/{CI_USER}/bg-{tag}-{uuid.uuid4().hex[:6]}")
    d.mkdir(mode=0o700)
    give_to_ci_user(d)
    return d


def one(shape: str, busy_s: float) -> dict[str, Any]:
    submit = separate if shape == "separate" else hetjob
    d = _fresh_dir(shape)
    t0 = time.time()
    ids = submit(d, 0)
    stamps = _wait_stamps(d, 3)
    all_started = max(stamps) - t0
    _cancel_wait(ids)
    # A group that cannot start yet: another job holds the gpu node.
    busy_dir = _fresh_dir("busy")
    blocker = _sbatch(
        _script(
            busy_dir / "busy.sbatch",
            f"#!/bin/bash\n#SBATCH --output={busy_dir}/o.txt\n{_header(COMPONENTS[2])}\n"
            f"sleep {busy_s}\n",
        )
    )
    while commands.job_info(blocker).state != "RUNNING":
        time.sleep(0.05)
    d2 = _fresh_dir(shape)
    t1 = time.time()
    ids2 = submit(d2, 0)
    first = min(_wait_stamps(d2, 1, timeout=busy_s + 120)) - t1
    _wait_stamps(d2, 3, timeout=busy_s + 120)
    _cancel_wait([*ids2, blocker])
    # Cancel one group: does the rest keep running?
    d3 = _fresh_dir(shape)
    ids3 = submit(d3, 60)
    _wait_stamps(d3, 3)
    gpu = f"{ids3[0]}+2" if shape == "hetjob" else ids3[2]
    cancel = subprocess.run(["scancel", gpu], capture_output=True, text=True, check=False)
    time.sleep(3)
    states = {j: commands.job_info(j).state for j in ids3}
    if shape == "hetjob":
        # Component states, as scontrol reports them per component.
        out = subprocess.run(
            ["squeue", "-h", "-j", ids3[0], "-o", "%i %T"], capture_output=True, text=True
        ).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
    _cancel_wait(ids3)
    return {
        "shape": shape,
        "all_started_s": round(all_started, 3),
        "head_started_busy_gpu_s": round(first, 3),
        "cancel_one": {
            "command": f"scancel {gpu}",
            "rc": cancel.returncode,
            "stderr": cancel.stderr.strip()[:200],
            "states_after": states,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy-s", type=float, default=15.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        report = _bench(args.runs, args.busy_s)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


def _bench(n: int, busy_s: float) -> dict[str, Any]:
    ours = not slurmcluster.is_up()
    cluster = slurmcluster.up(nodes=3, cpus_per_node=4, gpu_nodes=1)
    os.environ["SLURM_CONF"] = str(cluster.conf)
    runs: list[dict[str, Any]] = []
    try:
        for _ in range(n):
            for shape in ("separate", "hetjob"):
                runs.append(one(shape, busy_s))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        if ours:
            slurmcluster.down()
    summary = {
        shape: {
            key: statistics.median(r[key] for r in runs if r["shape"] == shape)
            for key in ("all_started_s", "head_started_busy_gpu_s")
        }
        for shape in ("separate", "hetjob")
    }
    return {"busy_s": busy_s, "runs": runs, "median": summary, "at": time.time()}


if __name__ == "__main__":
    main()
