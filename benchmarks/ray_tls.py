"""What Ray's own TLS costs a cluster: bring-up and throughput.

Runs the real option: the same cluster (2 nodes, ``deploy`` with a workload) with
``tls = true`` and ``tls = false``, interleaved (plain, tls, tls, plain, ...), on the
local target (loopback) or, with ``--target slurm``, on the local Slurm test cluster
(root; started if down) as its unprivileged CI user, where the two nodes are separate
network namespaces and Ray's traffic crosses the bed's bridge, or, with ``--target
ssh``, on this checkout's ssh bed (2 sshd hosts in network namespaces, bare nodes).
With TLS
the launcher makes the launch's CA and seals it into the rendezvous, each node opens it
and makes its own certificate before Ray starts, and every Ray process, the workload and
its tasks run with ``RAY_USE_TLS=1`` (syndeo/core/tls.py).  Per run: ``all_joined_s``
and ``teardown_done_s`` from deploy.json, each node's TLS set-up (``rendezvous_ok`` ->
``tls_ready`` in timeline.json: wait for the bundle, open it, make the certificate), and
from the workload (the driver on the head, the work pinned to the other node): no-op
tasks per second, sequential actor calls per second, and MB/s of objects moved head ->
node.  Written to results/bench/ray-tls-<target>.json.

    .venv/bin/python -m benchmarks.ray_tls [--target local|slurm|ssh] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WHERE = {
    "local": "local target (loopback)",
    "slurm": "the local Slurm test cluster (each node its own network namespace and IP)",
    "ssh": "the ssh bed (2 sshd hosts, each its own network namespace and IP)",
}

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


def _collect(res: Path, cid: str, mode: str, i: int) -> dict[str, Any]:
    """One run's figures from what deploy wrote, checked against the mode it was given."""
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


def _settings(mode: str) -> str:
    """TLS on or off said in the config, so neither run leans on a target's default."""
    return f"tls = {'true' if mode == 'tls' else 'false'}\njoin_timeout_s = 240\n"


def local_run(work: Path, mode: str, i: int) -> dict[str, Any]:
    cid = f"lp-tls-{mode}-{i}-{os.getpid()}"
    res = work / "res"
    (work / "tls.toml").write_text(_settings(mode))
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "syndeo", "deploy", "--target", "local", "--nodes", "2"),
            *("--config", str(work / "tls.toml"), "--cluster-id", cid),
            *("--run", f"python {work / 'workload.py'}", "--results-dir", str(res)),
        ],
        cwd=work,
        env={**os.environ, "SYNDEO_HOME": str(work / "home")},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run {i} failed:\n{proc.stderr[-3000:]}")
    return _collect(res, cid, mode, i)


def user_run(mode: str, i: int, body: str) -> dict[str, Any]:
    """A deploy of ``body`` (2 nodes running the workload) by the beds' unprivileged CI
    user, in a fresh directory and $SYNDEO_HOME of its own."""
    from testbeds.users import CI_USER, UserRun, give_to_ci_user

    run = UserRun(Path(f"/home/{CI_USER}/btls-{mode}-{i}-{os.getpid()}"))
    run.root.mkdir(mode=0o700)
    try:
        give_to_ci_user(run.root)
        (run.root / "workload.py").write_text(WORKLOAD)
        give_to_ci_user(run.root / "workload.py")
        head = 'nodes = 2\ncpus_per_node = 1\nrun = "python workload.py"\n' + _settings(mode)
        outcome = run.deploy(head + body.format(root=run.root))
        if outcome.get("exit_code") != 0:
            raise SystemExit(f"{mode} run {i} failed:\n{outcome['_stderr'][-3000:]}")
        return _collect(run.results, outcome["cluster_id"], mode, i)
    finally:
        run.remove()


# One job of 2 nodes: Slurm puts them on two bed nodes (their own namespaces and IPs).
SLURM_BODY = 'target = "slurm"\n[slurm]\npartition = "debug"\ntime = "00:10:00"\n'


def _ssh_body(bed: Any) -> str:
    """The ssh target on the bed's first two hosts, bare nodes, a file rendezvous (the
    hosts share /home here), as tests/ssh/test_deploy.py runs it."""
    from testbeds.users import CI_PYTHON

    hosts = json.dumps([h.ip for h in bed.hosts[:2]])
    return (
        'target = "ssh"\nrendezvous = "file://{root}/rdv"\n'
        f'[ssh]\nhosts = {hosts}\nkey = "{bed.key}"\nknown_hosts = "{bed.known_hosts}"\n'
        f'python = "{CI_PYTHON}"\nconnect_timeout_s = 20\n'
    )


def _interleaved(repeats: int) -> list[tuple[str, int]]:
    """plain, tls, tls, plain, ...: drift in the machine's load hits both modes alike."""
    order, counts = [], {"plain": 0, "tls": 0}
    for mode in ["plain", "tls", "tls", "plain"] * ((repeats + 1) // 2):
        if counts[mode] < repeats:
            counts[mode] += 1
            order.append((mode, counts[mode]))
    return order


def _runs(target: str, repeats: int) -> list[dict[str, Any]]:
    runs = []
    with contextlib.ExitStack() as stack:
        body = ""
        if target == "slurm":
            stack.enter_context(_slurm_bed())
            body = SLURM_BODY
        elif target == "ssh":
            body = _ssh_body(stack.enter_context(_ssh_bed()))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="syndeo-tls-")))
        (work / "workload.py").write_text(WORKLOAD)
        for mode, i in _interleaved(repeats):
            run = local_run(work, mode, i) if target == "local" else user_run(mode, i, body)
            print(json.dumps(run), flush=True)
            runs.append(run)
    return runs


@contextlib.contextmanager
def _slurm_bed() -> Iterator[None]:
    """The local Slurm test cluster (root; started if down, and then stopped again),
    under the machine-wide lock every user of the bed takes."""
    from testbeds import slurmcluster
    from testbeds.machine import SLURM_TESTBED_LOCK, machine_lock

    with machine_lock(SLURM_TESTBED_LOCK, "local Slurm test cluster"):
        ours = not slurmcluster.is_up()
        os.environ["SLURM_CONF"] = str(slurmcluster.up(nodes=3, cpus_per_node=4).conf)
        try:
            yield
        finally:
            if ours:
                slurmcluster.down()


def _ssh_bed() -> contextlib.AbstractContextManager[Any]:
    """This checkout's ssh bed (root): 2 sshd hosts, each a network namespace of its own
    on the bed's bridge; exclusive, and always torn down."""
    from testbeds import sshhosts

    return sshhosts.session(ROOT / ".testbed" / "ssh", n=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--target", choices=sorted(WHERE), default="local")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = _runs(args.target, args.repeats)
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
        "what": f"{WHERE[args.target]}, 2 nodes, deploy with tls = true vs false (Ray's TLS, "
        "a CA per launch); medians",
        "target": args.target,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": f"python -m benchmarks.ray_tls --target {args.target} --repeats {args.repeats}",
        "node_tls_setup_s": [r["node_tls_setup_s"] for r in runs if r["mode"] == "tls"],
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_avg_at_end": os.getloadavg(),
        "medians": medians,
        "tls_over_plain": {k: medians["tls"][k] / medians["plain"][k] for k in keys},
        "runs": runs,
    }
    out = ROOT / "results" / "bench" / f"ray-tls-{args.target}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["tls_over_plain"], indent=2))


if __name__ == "__main__":
    main()
