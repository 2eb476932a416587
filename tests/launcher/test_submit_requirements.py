"""Packages for one job on an ``up`` cluster: ``submit --requirements`` (or
requirements.txt in the work dir).  The launcher resolves the wheels (cached by what
decides them), stores them by digest; every node installs them from the rendezvous once
per digest, beside its own loop, and the job's PYTHONPATH names each node's own copy, so
its driver and its tasks on every node import them, a job with other requirements does
not see them, and no size limit of Ray's job upload applies.

A real 2-node local cluster, driven only through the ``syndeo`` CLI; the package
(typer) is in neither this venv nor the image's lock.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from syndeo.launcher.state import load_launched
from tests.support.helpers import ROOT, assert_nothing_left, one_line_error, reap, syndeo
from tests.support.wheels import big_wheel

PROGRAM = """\
import importlib, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

def where(name):
    try:
        return importlib.import_module(name).__file__
    except ImportError:
        return "missing"

@ray.remote(num_cpus=0.1)
def probe(names):
    return ray.get_runtime_context().get_node_id(), [where(n) for n in names]

ray.init()
names = ["typer", "shellingham"]
print("DRIVER", *[where(n) for n in names], flush=True)
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
found = ray.get([probe.options(scheduling_strategy=On(i, soft=False)).remote(names) for i in ids])
print("NODES", len({node for node, _ in found}), flush=True)
for _, paths in found:
    print("TASK", *paths, flush=True)
"""

BIG = """\
import os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

@ray.remote(num_cpus=0.1)
def probe():
    import bigpkg
    return ray.get_runtime_context().get_node_id(), bigpkg.__file__, os.path.getsize(bigpkg.BLOB)

ray.init()
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
found = ray.get([probe.options(scheduling_strategy=On(i, soft=False)).remote() for i in ids])
print("NODES", len({node for node, _, _ in found}), flush=True)
for _, path, size in found:
    print("BIG", path, size, flush=True)
"""
BIG_MIB = 300  # three times what Ray's job upload takes (100 MiB)


def invoke(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``invoke ARGS`` from this checkout's tasks.py, as the docs show it."""
    argv = [sys.executable, "-m", "invoke", "-r", str(ROOT), *args]
    return subprocess.run(
        argv,
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _project(root: Path, requirements: str | None) -> Path:
    root.mkdir()
    (root / "prog.py").write_text(PROGRAM)
    if requirements is not None:
        (root / "requirements.txt").write_text(requirements)
    return root


def _imports(stdout: str) -> list[list[str]]:
    """What the driver and each task found, per line: [typer, shellingham]."""
    return [ln.split()[1:] for ln in stdout.splitlines() if ln.startswith(("DRIVER", "TASK"))]


def _submit(tmp_path: Path, work: Path, *extra: str) -> tuple[str, str]:
    done = syndeo(
        "submit",
        "--workdir",
        str(work),
        *extra,
        "--follow",
        "--",
        "python",
        "prog.py",
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "NODES 2" in done.stdout, done.stdout
    return done.stdout, done.stderr


def _bad_requirements_are_refused(tmp_path: Path, work: Path, syndeo_home: Path, cid: str) -> None:
    """One line each, before anything reaches the cluster."""
    bad = {
        "nope.txt": "nope.txt: no such file",
        "ray.txt": "`ray==2.9.0` contradicts the image's `ray==2.60.0`",
        "none.txt": "no wheel of nosuch-package-syndeo-test for the nodes",
    }
    (tmp_path / "ray.txt").write_text("ray==2.9.0\n")
    (tmp_path / "none.txt").write_text("nosuch-package-syndeo-test\n")
    for name, says in bad.items():
        proc = syndeo(
            "submit",
            "--workdir",
            str(work),
            "--requirements",
            str(tmp_path / name),
            "--",
            "python",
            "prog.py",
            cwd=tmp_path,
            timeout=180,
        )
        assert says in one_line_error(proc)
    assert not list(syndeo_home.rglob(f"{cid}/a0/jobs/*")), "a refused job reached the cluster"


@pytest.mark.slow
def test_each_job_gets_its_own_packages_on_every_node(tmp_path: Path, syndeo_home: Path) -> None:
    cid = "jobs-reqs"
    with_typer = _project(tmp_path / "a", "typer\n")
    plain = _project(tmp_path / "b", None)
    with pytest.raises(ImportError):
        __import__("typer")  # not in this venv: the job gets it from its wheels
    try:
        up = syndeo(
            "up",
            "--nodes",
            "2",
            "--cluster-id",
            cid,
            "--join-timeout",
            "240",
            cwd=tmp_path,
            timeout=400,
        )
        assert up.returncode == 0, up.stderr[-3000:]
        _bad_requirements_are_refused(tmp_path, with_typer, syndeo_home, cid)

        # requirements.txt in the work dir, by default: driver and tasks on both nodes.
        out, err = _submit(tmp_path, with_typer)
        assert "wheels for the job resolved" in err
        found = _imports(out)
        assert len(found) == 3 and all("/typer/" in t and "/shellingham/" in s for t, s in found)

        # Another job, without requirements, on the same cluster: none of the first's.
        out, _ = _submit(tmp_path, plain)
        assert _imports(out) == [["missing", "missing"]] * 3, out

        # Other requirements (--requirements), as docs/jobs.md shows it (invoke, the work
        # dir here): its packages only.
        (plain / "job-reqs.txt").write_text("shellingham\n")
        shown = invoke(
            "submit",
            "--cluster-id",
            cid,
            "--requirements",
            "job-reqs.txt",
            "--follow",
            "--",
            "python",
            "prog.py",
            cwd=plain,
            timeout=300,
        )
        assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-3000:]
        found = _imports(shown.stdout)
        assert len(found) == 3, shown.stdout
        assert all(t == "missing" and "/shellingham/" in s for t, s in found), shown.stdout

        # The first again: resolved from the launcher's cache, stored and installed once.
        out, _ = _submit(tmp_path, with_typer)
        assert all("/typer/" in t for t, _s in _imports(out))
        assert len(list((syndeo_home / "wheelhouses").glob("*.tar.gz"))) == 2
        assert len(list(syndeo_home.rglob(f"{cid}/a0/wheelhouses/*.tar.gz"))) == 2
        # Each node installed each digest once (from the store, on its own), not per job;
        # every task imported its own node's copy, never one Ray uploaded.
        for log in load_launched(cid).local.logs:
            text = Path(log).read_text()
            assert text.count("installed in") == 2, text
        assert "/pylibs/" in out and "runtime_resources" not in out, out

        _a_big_package_without_ray_upload(tmp_path, syndeo_home, cid)

        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert_nothing_left(cid)
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)


def _status_gaps(syndeo_home: Path, cid: str, stop: threading.Event, gaps: list[float]) -> None:
    """The longest time between two status records the head published, while ``stop``
    is not set (the file rendezvous' status.json, read every 0.2 s)."""
    last_seen, last_change = None, time.monotonic()
    while not stop.wait(0.2):
        try:
            [path] = syndeo_home.rglob(f"{cid}/a0/status.json")
            updated = json.loads(path.read_text())["updated_at"]
        except (ValueError, OSError, KeyError):
            continue
        if updated != last_seen:
            gaps.append(time.monotonic() - last_change)
            last_seen, last_change = updated, time.monotonic()
    gaps.append(time.monotonic() - last_change)


def _submit_big(tmp_path: Path, work: Path, links: Path) -> tuple[str, str, float]:
    began = time.monotonic()
    done = syndeo(
        "submit",
        "--workdir",
        str(work),
        "--follow",
        "--",
        "python",
        "prog.py",
        cwd=tmp_path,
        env={"PIP_FIND_LINKS": str(links)},
        timeout=900,
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "413" not in done.stdout + done.stderr
    sizes = re.findall(r"^BIG (\S+) (\d+)$", done.stdout, re.M)
    assert "NODES 2" in done.stdout and len(sizes) == 2, done.stdout
    assert all("/pylibs/" in p and int(n) == BIG_MIB * 2**20 for p, n in sizes), sizes
    assert "installed on every node" in done.stdout  # the job's own log says it
    return done.stdout, done.stderr, took


def _node_figures(cid: str) -> tuple[list[str], list[float]]:
    """The nodes' lines about fetching the big wheels, and their install times."""
    logs = [Path(p).read_text() for p in load_launched(cid).local.logs]
    lines = [m for log in logs for m in re.findall(r"([0-9.]+) MiB fetched in ([^\n]*)", log)]
    fetched = [f"{mib} MiB in {rest}" for mib, rest in lines if float(mib) >= BIG_MIB]
    said = r"installed in ([0-9.]+) s \(([0-9]+)\.[0-9] MiB installed\)"
    installs = [float(t) for log in logs for t, mib in re.findall(said, log) if int(mib) >= BIG_MIB]
    return fetched, installs


def _a_big_package_without_ray_upload(tmp_path: Path, syndeo_home: Path, cid: str) -> None:
    """A wheel three times Ray's 100 MiB job upload (random bytes: it does not compress)
    reaches both nodes from the store, streamed, and imports there; the head's status
    goes on being published while the nodes install it; the same job again moves and
    installs nothing."""
    links = tmp_path / "links"
    big_wheel(links, "bigpkg", BIG_MIB)
    work = tmp_path / "big"
    work.mkdir()
    (work / "prog.py").write_text(BIG)
    (work / "requirements.txt").write_text("bigpkg\n")
    gaps: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_status_gaps, args=(syndeo_home, cid, stop, gaps))
    watcher.start()
    try:
        _, err, took = _submit_big(tmp_path, work, links)
    finally:
        stop.set()
        watcher.join()
    assert re.search(r"wheels uploaded: 300\.[0-9] of 300\.[0-9] MiB, [0-9.]+ MiB/s", err), err
    fetched, installs = _node_figures(cid)
    assert len(fetched) == 2 and len(installs) == 2, fetched
    # How far apart the head's status came while the nodes installed: a figure, not an
    # assertion (the install here takes 2.7-5.5 s, the status comes every 2 s: too close
    # to tell a stalled loop from a loaded machine by the clock).
    print(f"FIGURES first: submit to end {took:.1f} s; {err.strip()}; nodes {fetched} {installs}")
    print(f"FIGURES status gaps while installing: longest {max(gaps):.1f} s")

    _, err, took = _submit_big(tmp_path, work, links)
    assert "nothing uploaded" in err and "wheels uploaded" not in err, err
    assert _node_figures(cid) == (fetched, installs)  # nothing fetched, nothing installed
    print(f"FIGURES second: submit to end {took:.1f} s; {err.strip()}")
