"""Jobs through the rendezvous: how long from ``submit`` to the program's first line,
and from a line printed on the head to ``logs --follow`` showing it, per backend.

    python -m benchmarks.jobs_latency --backend file|s3|gs|az [--jobs 3] [--out x.json]

A 2-node local ``up`` cluster (bare nodes) meets through the backend (the emulators of
``testbeds/objectstores.py`` for s3, gs and az); each job prints a timestamped line
every 0.5 s, which the follower receives through the store.  Launcher and head share
this machine's clock, so the lag is measured directly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.cli import syndeo as _syndeo

PRINTER = (
    "import time\n"
    "for i in range(10):\n"
    "    print('tick', i, repr(time.time()), flush=True)\n"
    "    time.sleep(0.5)\n"
)


@contextlib.contextmanager
def _rendezvous(backend: str, tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if backend == "file":
        yield (tmp / "rdv").as_uri(), {}
        return
    from testbeds.objectstores import make_bucket, running

    with running(backend, tmp / "logs") as server:
        make_bucket(server, "jobs")
        yield f"{backend}://jobs/rv", dict(server.env)


def measure(backend: str, jobs: int) -> dict[str, Any]:
    from syndeo.launcher import job_client as jobs_api

    with tempfile.TemporaryDirectory(prefix="syndeo-jobs-bench-") as name:
        tmp = Path(name)
        work = tmp / "work"
        work.mkdir()
        (work / "printer.py").write_text(PRINTER)
        env = {"SYNDEO_HOME": str(tmp / "home")}
        with _rendezvous(backend, tmp) as (uri, store_env):
            env.update(store_env)
            os.environ.update(env)
            cid = f"jbench-{backend}"
            _syndeo(
                "up",
                "--nodes",
                "2",
                "--cluster-id",
                cid,
                "--rendezvous",
                uri,
                "--join-timeout",
                "240",
                env=env,
                cwd=tmp,
            )
            first_line: list[float] = []
            lags: list[float] = []
            try:
                for _ in range(jobs):
                    t0 = time.time()
                    cluster, spec = jobs_api.submit(
                        ["python", "printer.py"], cluster_id=cid, workdir=work
                    )
                    seen: list[float] = []

                    def emit(data: bytes, seen: list[float] = seen) -> None:
                        now = time.time()
                        for line in data.decode(errors="replace").splitlines():
                            if line.startswith("tick "):
                                seen.append(now)
                                lags.append(now - float(line.split()[2]))

                    jobs_api.logs(spec.job_id, emit, follow=True, cluster=cluster)
                    first_line.append(seen[0] - t0)
            finally:
                _syndeo("down", "--cluster-id", cid, env=env, cwd=tmp)
    return {
        "backend": backend,
        "jobs": jobs,
        "submit_to_first_line_s": {
            "median": round(statistics.median(first_line), 3),
            "max": round(max(first_line), 3),
            "all": [round(x, 3) for x in first_line],
        },
        "line_to_follower_s": {
            "median": round(statistics.median(lags), 3),
            "p90": round(sorted(lags)[int(0.9 * (len(lags) - 1))], 3),
            "max": round(max(lags), 3),
            "lines": len(lags),
        },
        "host": {"cpus": os.cpu_count()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["file", "s3", "gs", "az"], default="file")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    report = measure(args.backend, args.jobs)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
