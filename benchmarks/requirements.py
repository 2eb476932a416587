"""A program's packages (``--requirements``): a first run with a new requirements file
against a second run with the same one, for ``deploy`` and for ``submit``.

    python -m benchmarks.requirements [--out x.json]

Local, bare nodes (2 each), a file rendezvous, one fresh $SYNDEO_HOME; the file is
``typer`` (4 wheels not in the image: typer and shellingham are installed, click and
rich the image has).  Per run: the launcher's resolve (``wheelhouse.resolve``, timed in
this process: pip download, or the cache), the whole ``deploy`` / ``submit --follow``
wall time, each node's install (its timeline: ``packages_ready``) or the head's (its
log), and the bytes added (the archive the launcher caches and stores in the
rendezvous, the installed files per node).  Ratios compare runs of this same process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cli import syndeo as _syndeo

PROGRAM = """\
import ray, typer
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ray.init()

@ray.remote(num_cpus=0.1)
def where():
    import typer
    return ray.get_runtime_context().get_node_id()

ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
found = ray.get([where.options(scheduling_strategy=On(i, False)).remote() for i in ids])
print("NODES", len(set(found)))
"""


def _resolve(req: Path, home: Path) -> dict[str, Any]:
    """The launcher's resolve as deploy and submit call it, with the cache of ``home``
    (an empty one: pip download; the runs' own, after the first run: the cache)."""
    from syndeo.launcher import wheelhouse

    os.environ["SYNDEO_HOME"] = str(home)
    try:
        began = time.monotonic()
        archive = wheelhouse.resolve(req, wheelhouse.node_python(None))
        return {
            "resolve_s": round(time.monotonic() - began, 4),
            "archive_bytes": len(archive or b""),
        }
    finally:
        os.environ["SYNDEO_HOME"] = str(req.parent.parent / "home")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _deploy(tmp: Path, proj: Path, run: int) -> dict[str, Any]:
    cid = f"reqbench-d{run}"
    wall, out = _syndeo(
        "deploy",
        "--nodes",
        "2",
        "--cluster-id",
        cid,
        "--workdir",
        str(proj),
        "--run",
        "python prog.py",
        "--results-dir",
        str(tmp / "res"),
        "--join-timeout",
        "240",
        cwd=tmp,
    )
    assert "NODES 2" in out, out[-2000:]
    nodes = json.loads((tmp / "res" / cid / "timeline.json").read_text())["nodes"]
    install = {
        rank: round(m["packages_ready"] - m.get("tls_ready", m["rendezvous_ok"]), 2)
        for rank, m in nodes.items()
    }
    return {"deploy_wall_s": wall, "node_install_s": install}


def _submit(tmp: Path, proj: Path, cid: str) -> dict[str, Any]:
    from syndeo.launcher.state import load_launched

    log = Path(load_launched(cid).local.logs[0])
    before = log.read_text(errors="replace")
    wall, out = _syndeo(
        "submit", "--workdir", str(proj), "--follow", "--", "python", "prog.py", cwd=tmp
    )
    assert "NODES 2" in out, out[-2000:]
    said = re.findall(r"installed in ([0-9.]+) s", log.read_text(errors="replace")[len(before) :])
    scratch = Path(load_launched(cid).local.scratch[0])
    return {
        "submit_follow_wall_s": wall,
        "head_install_s": float(said[0]) if said else 0.0,
        "head_installed_bytes": _du(scratch / "pylibs"),
    }


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="syndeo-req-bench-") as name:
        tmp = Path(name)
        os.environ["SYNDEO_HOME"] = str(tmp / "home")
        proj = tmp / "proj"
        proj.mkdir()
        (proj / "prog.py").write_text(PROGRAM)
        req = proj / "requirements.txt"
        req.write_text("typer\n")
        deploy = [_deploy(tmp, proj, 1), _deploy(tmp, proj, 2)]
        resolve = [_resolve(req, tmp / "cold-1"), _resolve(req, tmp / "home")]
        # submit: a new file (other text, so not in the launcher's cache yet), twice.
        req.write_text("typer  # for submit\n")
        _syndeo(
            "up", "--nodes", "2", "--cluster-id", "reqbench-up", "--join-timeout", "240", cwd=tmp
        )
        try:
            submit = [_submit(tmp, proj, "reqbench-up"), _submit(tmp, proj, "reqbench-up")]
        finally:
            _syndeo("down", "--cluster-id", "reqbench-up", cwd=tmp)
        cache = tmp / "home" / "wheelhouses"
        return {
            "deploy": deploy,
            "submit": submit,
            "resolve": resolve,
            "launcher_cache_bytes": _du(cache),
            "ratios": {
                "resolve_cached_over_pip_download": _ratio(resolve, "resolve_s"),
                "deploy_wall_second_over_first": _ratio(deploy, "deploy_wall_s"),
                "submit_wall_second_over_first": _ratio(submit, "submit_follow_wall_s"),
            },
        }


def _ratio(runs: list[dict[str, Any]], key: str) -> float:
    return round(float(runs[1][key]) / max(float(runs[0][key]), 1e-3), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()
    text = json.dumps(measure(), indent=2, sort_keys=True)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
