"""Helpers for tests that drive real local clusters through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def syndeo(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m syndeo ARGS`` to completion and return its output."""
    return subprocess.run(
        [sys.executable, "-m", "syndeo", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def start_syndeo(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "syndeo", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def processes_of(cluster_id: str) -> list[psutil.Process]:
    """Every live process started for ``cluster_id``: all inherit SYNDEO_CLUSTER_ID."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SYNDEO_CLUSTER_ID") == cluster_id and p.status() != "zombie":
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def assert_nothing_left(cluster_id: str, wait_s: float = 0.0) -> None:
    """Nothing started for the cluster runs once its launcher has returned.

    Checked at once by default, not after a grace period that could hide a slow leak:
    each launcher stops what it started and waits for it before it returns, so a process
    still there is a teardown bug.  ``wait_s`` is for a caller that cannot wait on such an
    event (a launcher it killed outright): then each survivor's exit is waited on, up to
    that bound, and the caller says why it needs one.
    """
    left = processes_of(cluster_id)
    if left and wait_s > 0:
        _gone, left = psutil.wait_procs(left, timeout=wait_s)
        left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left for {cluster_id}: " + ", ".join(
        f"{p.pid} {p.name()}" for p in left
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The user-facing error: exit != 0, no traceback, a 'syndeo: error:' line."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("syndeo: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def read_json(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text())
    return data


def reap(cluster_id: str) -> None:
    """If the run failed or timed out, stop the node processes this test started (by PID)."""
    procs = processes_of(cluster_id)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _gone, alive = psutil.wait_procs(procs, timeout=60)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


LOCK_PROBE = (
    "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "except BlockingIOError: sys.exit(3)\n"
)


def lock_is_held(path: Path) -> bool:
    """True if another process holds ``path``'s flock (asked from a fresh process)."""
    probe = subprocess.run([sys.executable, "-c", LOCK_PROBE, str(path)], timeout=30)
    return probe.returncode == 3


# The small Ray program the local-cluster tests run (spreads tasks over the nodes).
PROBE = Path(__file__).resolve().parents[1] / "launcher" / "workload_probe.py"


# What nvidia-smi says on a machine without a working driver (exit 9).
_NO_DRIVER = (
    "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
    'driver."\nexit 9\n'
)


def no_gpu_path(bindir: Path, *rest: str) -> str:
    """A PATH on which nvidia-smi finds no GPU, whatever this machine has: a stand-in
    that fails as it does without a driver, ahead of ``rest`` (default /usr/bin:/bin).
    A plain ``PATH=/usr/bin:/bin`` would still find a real /usr/bin/nvidia-smi."""
    bindir.mkdir(parents=True, exist_ok=True)
    (bindir / "nvidia-smi").write_text(_NO_DRIVER)
    (bindir / "nvidia-smi").chmod(0o755)
    return os.pathsep.join([str(bindir), *(rest or ("/usr/bin", "/bin"))])


def local_status(home: Path, cluster_id: str, attempt: int = 0) -> dict[str, object]:
    """The head's status record of a cluster on a file rendezvous below ``home`` ({}
    until there is one)."""
    for path in home.rglob(f"{cluster_id}/a{attempt}/status.json"):
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, object] = json.loads(path.read_text())
            return data
    return {}


def wait_benchmark_running(
    proc: subprocess.Popen[str], home: Path, cluster_id: str, timeout_s: float = 240
) -> None:
    """Until the benchmark samples on every node (its progress is in the status)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = local_status(home, cluster_id)
        progress = st.get("progress") or {}
        if st.get("phase") == "running" and isinstance(progress, dict) and progress:
            return
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.5)
    raise AssertionError("the benchmark never started running")


def kill_rank(cluster_id: str, rank: int) -> int:
    """SIGKILL every process of one node (its syndeo node, Ray, Ray's workers; for rank
    0 the workload's driver too), as a crash would; how many there were."""
    victims = [p for p in processes_of(cluster_id) if p.environ().get("SYNDEO_RANK") == str(rank)]
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    return len(victims)


def run_node(env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``syndeo node`` in this interpreter with ``env`` added, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "syndeo", "node"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment is exactly ``env`` until the block ends (a node's view)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def launcher_of(proc: subprocess.Popen[str], verb: str = "deploy") -> psutil.Process:
    """The launcher's own Python under ``proc`` (``runuser`` -> ``env`` -> python, running
    ``syndeo VERB`` or ``invoke VERB``), to signal it as a terminal would.  Waits for it to
    exist (it is started by ``proc``), at most 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                argv = child.cmdline()
                if verb in argv and ("syndeo" in argv or "invoke" in argv):
                    return child
        time.sleep(0.1)
    raise AssertionError("the launcher process never appeared")
