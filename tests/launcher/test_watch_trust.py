"""The watcher of a live local ``up`` cluster acts only on what the head signed, fresh, and
runs nothing from the directory ``up`` was started in.

Whoever can write the cluster's store (a deployer, another cluster's nodes on a shared
bucket) writes, with plain file writes: a status saying "done" (twice, more than the
watcher's grace apart), one naming a healthy rank lost, and two of the head's own
records played back (its first, and an idle one while a job runs).  The watcher says
it ignored each, once, and goes on: no autostop, no replacement, no end.  Then a
``syndeo`` package is planted in the work dir ``up`` ran in, and the real autostop's
``down`` (a Python the watcher starts) takes the cluster down without importing it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from syndeo.launcher.spec import ProcWatcher
from syndeo.launcher.state import load_launched
from syndeo.launcher.watch import ENDED_GRACE_S
from syndeo.rendezvous import StatusRecord, open_rendezvous
from syndeo.rendezvous.base import Phase
from syndeo.rendezvous.file import parse_file_uri
from tests.support.helpers import assert_nothing_left, reap, syndeo

HOLD = "import time\ntime.sleep(600)\n"
PLANT = "open({marker!r}, 'w').write('ran')\n"
# Long enough for the job to start before the idle cluster's autostop: it was busy 6 s
# after the watcher started, under the full suite's three workers.
AUTOSTOP_S = 30
UNSIGNED = "a status record not signed by this cluster's head: ignored"
REPLAYED = "a status record older than one already read"


def _wait(what: str, check: Callable[[], object], timeout_s: float) -> object:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.2)
    return found


@pytest.mark.cluster
def test_the_watcher_acts_only_on_what_the_head_signed(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "ttrust"
    work = tmp_path / "work"
    work.mkdir()
    (work / "hold.py").write_text(HOLD)
    up = syndeo("up", "--nodes", "1", "--cluster-id", cid, "--autostop", f"{AUTOSTOP_S}s", cwd=work)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        _plant_and_watch(syndeo_home, cid, work, tmp_path / "planted-ran")
    finally:
        if (syndeo_home / "clusters" / cid / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)
    assert_nothing_left(cid)


def _plant_and_watch(syndeo_home: Path, cid: str, work: Path, marker: Path) -> None:
    here = syndeo_home / "clusters" / cid
    log = here / "watch.log"
    launched = load_launched(cid)
    rdv = open_rendezvous(launched.rendezvous, cid)
    status = Path(parse_file_uri(launched.rendezvous)) / cid / "a0" / "status.json"
    assert isinstance(launched.watcher, ProcWatcher)
    watcher = psutil.Process(launched.watcher.pid)
    # Isolated, in the cluster's own private dir: not the work dir `up` ran in.
    assert watcher.cwd() == str(here) and "-I" in watcher.cmdline()

    def said(line: str) -> int:
        return log.read_text().count(line)

    def plant(record: StatusRecord, line: str) -> None:
        """Write ``record`` over the head's status (which the head rewrites every 2 s)
        until the watcher has said ``line`` once more."""
        before = said(line)
        deadline = time.monotonic() + 60
        while said(line) == before:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            tmp = status.with_name(".planted")
            tmp.write_text(record.model_dump_json())
            os.replace(tmp, status)
            time.sleep(0.1)

    first = rdv.read_status()
    assert first is not None and first.signature is not None

    def idle() -> StatusRecord | None:  # a later record than the first
        st = rdv.read_status()
        later = st is not None and st.seq > first.seq
        return st if later and st.demand and st.demand.idle_since else None  # type: ignore[union-attr]

    idle_rec = _wait("an idle status", idle, 60)
    assert isinstance(idle_rec, StatusRecord) and idle_rec.demand is not None
    hold = syndeo("submit", "--cluster-id", cid, "--", "python", "hold.py", cwd=work)
    assert hold.returncode == 0, hold.stderr[-3000:]

    def busy() -> StatusRecord | None:
        st = rdv.read_status()
        return st if st is not None and st.demand and st.demand.idle_since is None else None

    now = _wait("the job's status (busy)", busy, 120)
    assert isinstance(now, StatusRecord)
    plant(now.model_copy(update={"phase": Phase.DONE}), UNSIGNED)
    first_done = time.monotonic()
    plant(now.model_copy(update={"nodes_lost": [1], "seq": now.seq + 1}), UNSIGNED)
    plant(first, REPLAYED)  # the head's own first record: no node joined yet
    # Late enough that the idle record is past autostop and the second "done" is past
    # the grace after the first, had either been taken.
    _wait(
        "autostop and the ended grace to pass",
        lambda: (
            time.time() - (idle_rec.demand.idle_since or 0) > AUTOSTOP_S + 2  # type: ignore[union-attr]
            and time.monotonic() - first_done > ENDED_GRACE_S + 2
        ),
        AUTOSTOP_S + ENDED_GRACE_S + 30,
    )
    plant(idle_rec, REPLAYED)
    again = _wait("the head's status again", busy, 30)
    assert isinstance(again, StatusRecord)
    plant(again.model_copy(update={"phase": Phase.FAILED}), UNSIGNED)
    # Then 2 more polls of the watcher: it still runs, the cluster with it.
    polled = (here / "watch.alive").stat().st_mtime
    _wait("two more polls", lambda: (here / "watch.alive").stat().st_mtime > polled + 5, 30)
    assert watcher.is_running() and (here / "launched.json").exists()
    text = log.read_text()
    assert (text.count(UNSIGNED), text.count(REPLAYED)) == (3, 2), text[-3000:]
    assert "autostop" not in text and "has ended" not in text and "rank 1" not in text, text
    assert (
        not (here / "recovery.json").exists()
        or json.loads((here / "recovery.json").read_text()) == []
    )
    _autostop_runs_nothing_planted(work, marker, log, hold.stdout.split()[0], cid)


def _autostop_runs_nothing_planted(work: Path, marker: Path, log: Path, job: str, cid: str) -> None:
    """A package planted in the work dir `up` ran in, after it ran: the autostop's `down`
    is started by the watcher, and imports nothing of it."""
    (work / "syndeo").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (work / "syndeo" / name).write_text(PLANT.format(marker=str(marker)))
    (work / "sitecustomize.py").write_text(PLANT.format(marker=str(marker)))
    assert syndeo("cancel", "--job", job, "--cluster-id", cid, cwd=work.parent).returncode == 0
    _wait("autostop", lambda: "is down (autostop)" in log.read_text(), AUTOSTOP_S + 120)
    assert not marker.exists(), "the autostop's `down` imported a planted package"
    assert not (log.parent / "launched.json").exists()
