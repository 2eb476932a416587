"""invoke tasks for the project's own measurements; the project's tasks.py adds them.

invoke bench-bringup --target local --nodes 3   # bring-up/teardown vs a bare `ray start`
invoke bench-rendezvous --backend s3            # rendezvous registration and lookup times
"""

from __future__ import annotations

import json
from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from syndeo.core.errors import SyndeoError


@task(
    auto_shortflags=False,
    help={
        "target": "local | slurm (default local)",
        "nodes": "cluster size (default 3)",
        "container": "run every node (and nothing else) in this Apptainer image (.sif)",
        "runs": "runs of each kind, interleaved A B B A (default 5)",
        "config": "TOML settings for the cluster runs (e.g. the [slurm] section)",
        "out": "result JSON (default results/bringup-<time>.json)",
    },
)
def bench_bringup(
    c: Context,
    target: str = "local",
    nodes: int = 3,
    container: str | None = None,
    runs: int = 5,
    config: str | None = None,
    out: str | None = None,
) -> None:
    """Bring-up and teardown of a cluster against one bare `ray start --head`, as ratios."""
    from benchmarks.bringup import run

    try:
        doc = run(
            target=target,
            nodes=nodes,
            runs=runs,
            container=Path(container) if container else None,
            config=Path(config) if config else None,
            out=Path(out) if out else None,
        )
    except SyndeoError as e:
        raise Exit(f"syndeo: error: {e}", code=e.exit_code) from None
    print(json.dumps(doc["summary"], indent=2))


@task(
    auto_shortflags=False, help={"backend": "file | s3 | gs | az", "out": "where to write the JSON"}
)
def bench_rendezvous(
    c: Context, backend: str = "file", out: str = "results/rendezvous.json"
) -> None:
    """Rendezvous timings: 200 concurrent registrations, time for a worker to see the head."""
    from benchmarks.rendezvous_latency import main

    code = main(["--backend", backend, "--out", out])
    if code:
        raise Exit(code=code)
