"""What Ray's own TLS costs a cluster (issue 22 item 4): bring-up and throughput.

Runs the real option: the same local cluster (2 nodes, ``deploy`` with a workload)
with ``--tls`` and without, interleaved (plain, tls, tls, plain, ...).  With ``--tls``
the launcher makes the launch's CA and seals it into the rendezvous, each node opens it
and makes its own certificate before Ray starts, and every Ray process, the workload and
its tasks run with ``RAY_USE_TLS=1`` (syndeo/core/tls.py).  Per run: ``all_joined_s``
and ``teardown_done_s`` from deploy.json, each node's TLS set-up (``rendezvous_ok`` ->
``tls_ready`` in timeline.json: wait for the bundle, open it, make the certificate), and
from the workload (the driver on the head, the work pinned to the other node): no-op
tasks per second, sequential actor calls per second, and MB/s of objects moved head ->
node.  Written to results/bench/ray-tls-local.json.

    .venv/bin/python -m benchmarks.ray_tls [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench" / "ray-tls-local.json"

WORKLOAD = r"""
import json, os, time
import ray

ray.init()
far = {"label_selector": {"syndeo-rank": "1"}}

@ray.remote(num_cpus=0)
def noop():
    return None

@ray.remote(num_cpus=0)
def size(*blobs):
    return sum(len(b) for b in blobs)

@ray.remote(num_cpus=0)
class Echo:
    def ping(self, x):
        return x

def rate(n, fn):
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)

ray.get([noop.options(**far).remote() for _ in range(50)])  # warm the remote workers
tasks = rate(1000, lambda: ray.get([noop.options(**far).remote() for _ in range(1000)]))
echo = Echo.options(**far).remote()
ray.get(echo.ping.remote(0))
calls = rate(500, lambda: [ray.get(echo.ping.remote(i)) for i in range(500)])
mb = 0.0
for _ in range(3):
    refs = [ray.put(os.urandom(1 << 20) * 16) for _ in range(4)]  # 4 x 16 MiB
    t0 = time.perf_counter()
    assert ray.get(size.options(**far).remote(*refs)) == 4 * 16 * (1 << 20)
    mb = max(mb, 64 / (time.perf_counter() - t0))
out = {"tasks_per_s": tasks, "actor_calls_per_s": calls, "transfer_mb_per_s": mb,
       "tls": os.environ.get("RAY_USE_TLS") == "1"}
tmp = os.environ["SYNDEO_RESULT_PATH"] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(out, fh)
os.replace(tmp, os.environ["SYNDEO_RESULT_PATH"])
"""


def _tls_setup_s(timeline: dict[str, Any]) -> float | None:
    """The slowest node's TLS set-up (rendezvous_ok -> tls_ready), or None without TLS."""
    spans = [
        m["tls_ready"] - m["rendezvous_ok"]
        for m in timeline.get("nodes", {}).values()
        if "tls_ready" in m and "rendezvous_ok" in m
    ]
    return round(max(spans), 3) if spans else None


def one_run(work: Path, mode: str, i: int) -> dict[str, Any]:
    cid = f"lp-tls-{mode}-{i}-{os.getpid()}"
    res = work / "res"
    env = {**os.environ, "SYNDEO_HOME": str(work / "home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "syndeo",
            "deploy",
            "--target",
            "local",
            "--nodes",
            "2",
            "--cluster-id",
            cid,
            "--run",
            f"python {work / 'workload.py'}",
            "--results-dir",
            str(res),
            "--join-timeout",
            "240",
            *(["--tls"] if mode == "tls" else []),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run {i} failed:\n{proc.stderr[-3000:]}")
    summary = json.loads((res / cid / "deploy.json").read_text())
    if summary.get("tls") is not (mode == "tls"):
        raise SystemExit(f"{mode} run {i}: deploy.json says tls={summary.get('tls')}")
    result = json.loads((res / cid / "result.json").read_text())
    if result.pop("tls") != (mode == "tls"):
        raise SystemExit(f"{mode} run {i}: the workload saw RAY_USE_TLS wrong")
    timeline = json.loads((res / cid / "timeline.json").read_text())
    t = summary["timings_s"]
    return {
        "mode": mode,
        "all_joined_s": t["all_joined_s"],
        "teardown_done_s": t["teardown_done_s"],
        "node_tls_setup_s": _tls_setup_s(timeline),
        **result,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="syndeo-tls-") as tmp:
        work = Path(tmp)
        (work / "workload.py").write_text(WORKLOAD)
        order = ["plain", "tls", "tls", "plain"] * ((args.repeats + 1) // 2)
        counts = {"plain": 0, "tls": 0}
        for mode in order:
            if counts[mode] >= args.repeats:
                continue
            counts[mode] += 1
            run = one_run(work, mode, counts[mode])
            print(json.dumps(run), flush=True)
            runs.append(run)
    keys = [
        "all_joined_s",
        "teardown_done_s",
        "tasks_per_s",
        "actor_calls_per_s",
        "transfer_mb_per_s",
    ]
    medians = {
        mode: {k: statistics.median(r[k] for r in runs if r["mode"] == mode) for k in keys}
        for mode in ("plain", "tls")
    }
    doc = {
        "what": "local target, 2 nodes, deploy --tls vs plain (Ray's TLS, a CA per launch); "
        "medians",
        "node_tls_setup_s": [r["node_tls_setup_s"] for r in runs if r["mode"] == "tls"],
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_at_end": os.getloadavg(),
        "medians": medians,
        "tls_over_plain": {k: medians["tls"][k] / medians["plain"][k] for k in keys},
        "runs": runs,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["tls_over_plain"], indent=2))


if __name__ == "__main__":
    main()
