"""Benchmark: Slurm job start -> "all nodes joined", and end-to-end job time (JSON).

Runs on the local Slurm test cluster (root; started if it is down) with jobs
submitted by the unprivileged CI user, bare and optionally in the container,
interleaved so machine noise hits both alike::

    .venv/bin/python -m benchmarks.slurm_readiness --runs 3 \
        --container /var/tmp/syndeo-test-image-<hash>/syndeo.sif --out results/slurm-readiness.json

Job start is the batch script's first line (``... at <epoch>``); "all joined" is
when the head's published status first lists every node (polled every 20 ms).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from testbeds import slurmcluster
from testbeds.users import UserRun, give_to_ci_user

# the small Ray program the Slurm tests run (a file it copies, not an import)
WORKLOAD = Path(__file__).resolve().parents[1] / "tests" / "slurm" / "workload.py"

START_RE = re.compile(r"^syndeo: job (\d+) attempt \d+ on \S+ at ([\d.]+)", re.M)
HEAD_RE = re.compile(r"head up at \S+ after ([\d.]+) s")


def one_run(nodes: int, sif: Path | None) -> dict[str, Any]:
    root = Path(f"/home/syndeo-ci/bench-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    run = UserRun(root)
    workload = root / "workload.py"
    shutil.copy(WORKLOAD, workload)
    workload.chmod(0o644)
    body = (
        f'target = "slurm"\nnodes = {nodes}\ncpus_per_node = 1\njoin_timeout_s = 300\n'
        f'run = "python workload.py --tasks {nodes} --seconds 0.1"\n'
        + (f'container = "{sif}"\n' if sif else "")
        + '[slurm]\npartition = "debug"\n'
    )
    t0 = time.time()
    proc = run.start(body)
    joined_at = None
    rdv = run.home / "slurm" / "rendezvous"
    while proc.poll() is None:
        if joined_at is None:
            for status in rdv.glob("*/a0/status.json"):
                try:
                    if len(json.loads(status.read_text())["nodes_joined"]) >= nodes:
                        joined_at = time.time()
                except (OSError, ValueError, KeyError):
                    pass
        time.sleep(0.02)
    t_end = time.time()
    outcome = UserRun.finish(proc)
    log = next((run.home / "slurm" / "jobs").glob("*/slurm-*.out")).read_text()
    start = START_RE.search(log)
    head = HEAD_RE.search(log)
    run.remove()
    if start is None or joined_at is None or outcome.get("exit_code") != 0:
        return {"ok": False, "outcome": {k: v for k, v in outcome.items() if k != "_stderr"}}
    job_start = float(start.group(2))
    return {
        "ok": True,
        "mode": "container" if sif else "bare",
        "job_id": start.group(1),
        "queue_s": round(job_start - t0, 3),
        "start_to_all_joined_s": round(joined_at - job_start, 3),
        "head_up_s": float(head.group(1)) if head else None,
        "job_start_to_done_s": round(t_end - job_start, 3),
        "end_to_end_s": round(t_end - t0, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--container", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("results/slurm-readiness.json"))
    args = ap.parse_args()
    slurmcluster.up(nodes=3, cpus_per_node=4)
    modes: list[Path | None] = [None] + ([args.container] if args.container else [])
    runs = []
    for i in range(args.runs):
        # ABBA order: drift in machine load affects both modes equally.
        for sif in modes if i % 2 == 0 else list(reversed(modes)):
            r = one_run(args.nodes, sif)
            print(json.dumps(r), flush=True)
            runs.append(r)
    summary: dict[str, Any] = {}
    for mode in ("bare", "container"):
        ok = [r for r in runs if r.get("ok") and r["mode"] == mode]
        if ok:
            summary[mode] = {
                key: {
                    "median": statistics.median(r[key] for r in ok),
                    "min": min(r[key] for r in ok),
                    "max": max(r[key] for r in ok),
                }
                for key in ("start_to_all_joined_s", "job_start_to_done_s", "end_to_end_s")
            } | {"n": len(ok)}
    load = Path("/proc/loadavg").read_text().split()[:3]
    report = {"nodes": args.nodes, "runs": runs, "summary": summary, "loadavg_at_end": load}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
