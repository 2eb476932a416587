"""The watcher of a local ``up`` cluster survives an unexpected error in a poll, and
once killed, ``status`` says so in one line and ``syndeo watch`` brings it back, after
which the cluster follows demand again: one real cluster, driven as a user would."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from syndeo.launcher.spec import LedgerEntry, ProcWatcher
from syndeo.launcher.state import cluster_lock, home, load_launched, write_atomic
from tests.support.helpers import assert_nothing_left, syndeo
from tests.support.programs import spread

# Two one-CPU tasks on two nodes, on a cluster of one one-CPU node: Ray's autoscaler
# asks for a worker (the placement group waits for it).
WIDE = spread(2)


def _wait_for(what: str, check: object, timeout_s: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        said = log.read_text()[-8000:] if log is not None and log.exists() else ""
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}\n{said}"
        time.sleep(0.5)


def _text(log: Path) -> str:
    return log.read_text() if log.exists() else ""


def _row(cid: str, work: Path) -> dict[str, object]:
    listed = json.loads(syndeo("status", "--json", cwd=work).stdout)
    row: dict[str, object] = next(r for r in listed if r["cluster_id"] == cid)
    return row


@pytest.mark.cluster
def test_a_killed_watcher_is_shown_brought_back_and_follows_demand_again(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "twatch"
    work = tmp_path / "work"
    work.mkdir()
    (work / "wide.py").write_text(WIDE)
    up = syndeo("up", "--cluster-id", cid, "--max-nodes", "2", "--idle-timeout", "10s", cwd=work)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        log = syndeo_home / "clusters" / cid / "watch.log"
        _survives_an_unexpected_error(cid, log)
        _killed_shown_and_restarted(cid, work)
        since, asked_after = len(log.read_text()), time.time()
        wide = syndeo(
            "submit", "--cluster-id", cid, "--follow", "--", "python", "wide.py", cwd=work
        )
        assert wide.returncode == 0, wide.stderr[-3000:]
        assert "nodes used 2" in wide.stdout
        # The restarted watcher, not an earlier one, started the worker Ray asked for.
        _wait_for(
            "the start logged", lambda: "group worker: started" in log.read_text()[since:], 60
        )
        # Idle for 10 s, Ray lets the worker go: the ledger keeps when it was asked for
        # and when it ended (what `status` counts as cost on a cloud).  The watcher is
        # held until the node has left by itself (a busy launcher polls late): the
        # release is still said as one, not lost.
        _left_while_the_watcher_is_held(cid, syndeo_home / "clusters" / cid / "node-1.log")
        _wait_for("the worker let go", lambda: "let go rank 1" in log.read_text()[since:], 60, log)
        _wait_for("its end in the ledger", lambda: _last_end(cid) is not None, 30)
        entry = load_launched(cid).ledger[-1]
        assert entry.end is not None
        assert entry.group == "worker" and asked_after <= entry.start < entry.end
    finally:  # whatever failed, nothing of the cluster outlives the test
        if (syndeo_home / "clusters" / cid / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=work)
    assert_nothing_left(cid)


def _left_while_the_watcher_is_held(cid: str, node_log: Path) -> None:
    pid = _watcher(cid).pid
    os.kill(pid, signal.SIGSTOP)
    try:
        said = "Ray's autoscaler let this node go"
        _wait_for("the worker leaving", lambda: said in _text(node_log), 120, node_log)
        node = load_launched(cid).local.pids[1]
        _wait_for("its process ended", lambda: _ended(node), 60)
    finally:
        os.kill(pid, signal.SIGCONT)


def _ended(pid: int) -> bool:
    """Whether ``pid`` exited (unreaped while its parent, the watcher, is held)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _last_end(cid: str) -> float | None:
    book: list[LedgerEntry] = load_launched(cid).ledger
    return book[-1].end if book else None


def _watcher(cid: str) -> ProcWatcher:
    entry = load_launched(cid).watcher
    assert isinstance(entry, ProcWatcher)
    return entry


def _survives_an_unexpected_error(cid: str, log: Path) -> None:
    """A saved state its poll cannot read (a value of the wrong type): the watcher says
    so with a count, waits, and carries on once the state is right again."""
    pid = _watcher(cid).pid
    # `up` returns once the watcher is started, not once it has read the state: a
    # state corrupt before that stops it at once (the error below is one of a poll's).
    _wait_for("the watcher's first line", lambda: "watching cluster" in _text(log), 30, log)
    path = home() / "clusters" / cid / "launched.json"
    with cluster_lock(cid):
        good = path.read_text()
        raw = json.loads(good)
        raw["part"]["grown"] = "not a list"
        write_atomic(path, json.dumps(raw).encode())
    try:
        said = "unexpected error in a poll (1 so far"
        _wait_for("the error logged", lambda: said in log.read_text(), 30, log)
    finally:  # put right whatever happened: `down` reads it too
        with cluster_lock(cid):
            write_atomic(path, good.encode())
    _wait_for("polls again", lambda: "polls work again after" in log.read_text(), 60)
    assert psutil.pid_exists(pid) and "the watcher stops" not in log.read_text()


def _killed_shown_and_restarted(cid: str, work: Path) -> None:
    pid, started = _watcher(cid).pid, _watcher(cid).create_time
    os.kill(pid, signal.SIGKILL)
    psutil.Process(pid).wait(10)  # not our child: psutil polls until it is gone
    row = _row(cid, work)
    assert (row["watcher"], row["watcher_dead"]) == (False, True)
    table = syndeo("status", cwd=work).stdout
    note = f"{cid}: watcher not running; restart: `syndeo watch --cluster-id {cid}`"
    assert note in table.splitlines(), table  # one line

    again = syndeo("watch", "--cluster-id", cid, cwd=work)
    assert again.returncode == 0, again.stderr[-3000:]
    entry = _watcher(cid)
    assert entry.pid != pid and entry.create_time != started
    row = _row(cid, work)
    assert (row["watcher"], row["watcher_dead"]) == (True, False)
    # Once more: it runs, so nothing is started twice.
    twice = syndeo("watch", "--cluster-id", cid, cwd=work)
    assert twice.returncode == 0 and "runs already" in twice.stderr + twice.stdout
    assert _watcher(cid) == entry
