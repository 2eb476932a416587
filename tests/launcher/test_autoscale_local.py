"""A local ``up`` cluster that follows demand through Ray's own autoscaler, then stops
itself once idle: one real cluster, driven through the ``syndeo`` CLI as a user would."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from syndeo.launcher.spec import launched_key
from syndeo.launcher.state import load_launched
from syndeo.rendezvous import StatusRecord, open_rendezvous
from tests.support.helpers import assert_nothing_left, syndeo
from tests.support.programs import spread

# Three one-CPU tasks, one per node, on a cluster of one one-CPU node: Ray's autoscaler
# asks for two more nodes (a placement group spread over three nodes waits for them).
WIDE = spread(3)
# A job that holds the cluster busy (no autostop) while using no Ray resource.
HOLD = "import time\ntime.sleep(600)\n"


def _wait_for(what: str, check: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(1)


@pytest.mark.cluster
def test_a_cluster_grows_with_demand_shrinks_when_idle_and_stops_itself(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tscale"
    work = tmp_path / "work"
    work.mkdir()
    (work / "wide.py").write_text(WIDE)
    (work / "hold.py").write_text(HOLD)
    up = syndeo(
        "up",
        *("--cluster-id", cid, "--max-nodes", "3", "--idle-timeout", "10s"),
        *("--autostop", "20s"),
        cwd=work,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        _follow_demand_then_stop(syndeo_home, cid, work)
    finally:  # whatever failed, nothing of the cluster outlives the test
        if (syndeo_home / "clusters" / cid / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=work)
    assert_nothing_left(cid)


def _follow_demand_then_stop(syndeo_home: Path, cid: str, work: Path) -> None:
    log = syndeo_home / "clusters" / cid / "watch.log"
    launched = load_launched(cid)
    rdv = open_rendezvous(launched.rendezvous, cid)

    def workers() -> list[int]:
        st = rdv.read_status()
        return st.groups.get("worker", [0, 0]) if st else [-1, -1]

    assert workers() == [0, 0]  # it starts at its minimum: the head alone
    hold = syndeo("submit", "--cluster-id", cid, "--", "python", "hold.py", cwd=work)
    assert hold.returncode == 0, hold.stderr[-3000:]
    wide = syndeo("submit", "--cluster-id", cid, "--follow", "--", "python", "wide.py", cwd=work)
    assert wide.returncode == 0, wide.stderr[-3000:]
    assert "nodes used 3" in wide.stdout
    # (The nodes may join and the job end before the watcher has logged the start.)
    _wait_for("the start logged", lambda: "group worker: started" in log.read_text(), 60)
    listed = json.loads(syndeo("status", "--json", cwd=work).stdout)  # while it serves
    row = next(r for r in listed if r["cluster_id"] == cid)
    assert (row["state"], row["groups"][1]["name"]) == ("serving", "worker")
    assert (row["groups"][1]["min"], row["groups"][1]["max"]) == (0, 2)
    # Idle for 10 s: Ray's autoscaler lets both workers go, the watcher stops them.
    _wait_for("the workers let go", lambda: "let go rank" in log.read_text(), 120)
    # Ray may let the two go one poll apart, and the head records the count a poll
    # after that: wait for both rather than read the count at the first release.
    _wait_for("both workers gone from the status", lambda: workers() == [0, 0], 60)
    assert rdv.read_status().nodes_lost == []  # type: ignore[union-attr]  # not losses
    # Drained as idle (the drain a busy node refuses), which the head tells from a spot
    # notice's drain by what the autoscaler's provider wrote.
    head_log = (syndeo_home / "clusters" / cid / "node-0.log").read_text()
    assert "spot notice" not in head_log and "interrupted" not in log.read_text(), head_log
    # The running job (it uses no Ray resource) has held off autostop until now.
    assert "autostop" not in log.read_text()
    job = hold.stdout.split()[0]
    assert syndeo("cancel", "--job", job, "--cluster-id", cid, cwd=work).returncode == 0
    # Nothing runs now: 20 s later the watcher takes the cluster down as `down` would.
    _wait_for("autostop", lambda: "is down (autostop)" in log.read_text(), 120)
    assert not (syndeo_home / "clusters" / cid / "launched.json").exists()


@pytest.mark.cluster
def test_a_demand_planted_in_the_store_changes_nothing(syndeo_home: Path, tmp_path: Path) -> None:
    """Someone who can write the cluster's prefix rewrites the head's status with a
    request for 1,000 nodes and an idle time of hours (the head's signature left as it
    was): the live watcher says it ignored it, starts nothing and does not autostop."""
    cid = "tplant"
    up = syndeo(
        "up",
        *("--cluster-id", cid, "--max-nodes", "3", "--idle-timeout", "10s"),
        *("--autostop", "1h"),
        cwd=tmp_path,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    log = syndeo_home / "clusters" / cid / "watch.log"
    try:
        rdv = open_rendezvous(load_launched(cid).rendezvous, cid)
        deadline = time.monotonic() + 60
        while "not signed by this cluster's head: ignored" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            st = rdv.read_status()
            assert st is not None and st.demand is not None
            forged = st.demand.model_copy(
                update={
                    "seq": st.demand.seq + 1,
                    "want": {"worker": 1000},
                    "idle_since": time.time() - 86400,
                }
            )
            # Again and again: the head rewrites its status every 2 s.
            rdv.publish_status(st.model_copy(update={"demand": forged}))
            time.sleep(0.1)
        # The head's own record again (its signature holds): still at the minimum.
        key = launched_key(load_launched(cid))

        def own() -> StatusRecord | None:
            st = rdv.read_status()
            ok = st is not None and st.demand is not None and st.demand.verified(key, cid, 0)
            return st if ok else None

        _wait_for("the head's own status again", own, 30)
        st = own() or rdv.read_status()
        assert st is not None and st.groups.get("worker", [0, 0]) == [0, 0]
        text = log.read_text()
        assert "started" not in text and "autostop" not in text, text
    finally:
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
    assert down.returncode == 0, down.stderr[-3000:]
    assert_nothing_left(cid)
