"""How a joined worker learns its cluster is over (syndeo/node/leaving.py), without Ray.

Ray-side checks are plain callables here; the store is a real file rendezvous.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from syndeo.core.launchkey import new_key
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node import leaving
from syndeo.node.leaving import Released, gcs_reachable, released_by_ray, wait_until_done
from syndeo.node.poweroff import released_status
from syndeo.rendezvous import DoneRecord, open_rendezvous

KEY = new_key()


def _done(message: str) -> DoneRecord:
    """The head's done record of cluster c1, attempt 0, signed with its launch key."""
    record = DoneRecord(
        cluster_id="c1", attempt=0, exit_code=0, message=message, finished_at=time.time()
    )
    return record.signed(KEY)


def _signed(done: DoneRecord) -> bool:
    return done.verified(KEY, "c1", 0)


def test_a_worker_leaves_soon_after_the_head_with_its_done_record(tmp_path: Path) -> None:
    """The head finishes while the worker waits, right after one of the worker's regular
    looks for the done record (ordered by that event, not by sleeps): the worker's first
    look at the gone head reads the record and leaves -- it does not wait for its next
    regular look (backing off), nor for the head to stay gone a while, nor for Ray."""
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    head_up = True
    looks_after_head_left = 0
    read_done = rdv.read_done

    def worker_reads_done() -> DoneRecord | None:
        nonlocal head_up
        found = read_done()
        if head_up:  # the head ends just after this regular look found nothing
            rdv.mark_done(_done("ok"))
            head_up = False
        return found

    def head_alive() -> bool:
        nonlocal looks_after_head_left
        looks_after_head_left += not head_up
        return head_up

    rdv.read_done = worker_reads_done  # type: ignore[method-assign]
    done = wait_until_done(rdv, lambda: True, head_alive, lambda _m: None, _signed)
    assert done is not None and done.message == "ok"
    assert looks_after_head_left == 1


def test_the_store_being_unreadable_does_not_end_the_wait(tmp_path: Path) -> None:
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    broken = tmp_path / "rv" / "c1" / "a0" / "done.json"
    broken.mkdir(parents=True)  # every read of done fails (EISDIR -> RendezvousError)
    head_up = threading.Event()
    head_up.set()
    logs: list[str] = []
    met_outage = threading.Event()

    def log(message: str) -> None:
        logs.append(message)
        if "rendezvous unreachable" in message:
            met_outage.set()

    def store_returns_then_head_finishes() -> None:
        # Once the worker has met the unreadable store and kept waiting.
        assert met_outage.wait(60)
        broken.rmdir()
        rdv.mark_done(_done("ok"))
        head_up.clear()

    head = threading.Thread(target=store_returns_then_head_finishes)
    head.start()
    done = wait_until_done(rdv, lambda: True, head_up.is_set, log, _signed)
    head.join()
    assert done is not None and done.message == "ok"
    assert any("rendezvous unreachable" in m for m in logs)


def test_gcs_probe_tells_an_open_port_from_a_closed_one() -> None:
    import socket

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert gcs_reachable(f"127.0.0.1:{port}")
    assert not gcs_reachable(f"127.0.0.1:{port}")


def test_a_done_record_the_head_did_not_sign_sends_no_worker_away(tmp_path: Path) -> None:
    """A done record planted in the store (unsigned, signed with another key, or the head's
    own for another cluster) is ignored, said once; the head's own then ends the wait."""
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    other = DoneRecord(cluster_id="c2", attempt=0, exit_code=0, message="c2", finished_at=1.0)
    forged = [
        DoneRecord(cluster_id="c1", attempt=0, exit_code=0, message="unsigned", finished_at=1.0),
        _done("another key").model_copy(update={"signature": _done("x").signature}),
        other.signed(KEY),
    ]
    logs: list[str] = []
    reads = 0
    read_done = rdv.read_done

    def planted_then_real() -> DoneRecord | None:
        nonlocal reads
        reads += 1
        if reads <= len(forged):
            rdv.mark_done(forged[reads - 1])
        else:
            rdv.mark_done(_done("the head's"))
        return read_done()

    rdv.read_done = planted_then_real  # type: ignore[method-assign]
    done = wait_until_done(rdv, lambda: True, lambda: False, logs.append, _signed)
    assert done is not None and done.message == "the head's"
    assert reads > len(forged)
    assert sum("did not sign" in m for m in logs) == 1, logs


def _node(state: str, reason: str = "", message: str = "") -> Any:
    """A node's entry as Ray's GCS keeps it (Ray's own message type)."""
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    info = GcsNodeInfo(state=GcsNodeInfo.GcsNodeState.Value(state))
    if reason:
        info.death_info.reason = type(info.death_info).Reason.Value(reason)
        info.death_info.reason_message = message
    return info


@pytest.mark.parametrize(
    ("state", "reason", "message", "released"),
    [
        # v1's drain_nodes (Ray's autoscaler letting an idle node go), as Ray 2.60 records it.
        ("DEAD", "EXPECTED_TERMINATION", "Terminated by autoscaler.", True),
        # The idle drain a busy node refuses (autoscaler v2, `ray drain-node`).
        ("DEAD", "AUTOSCALER_DRAIN_IDLE", "idle for 600 s", True),
        ("DEAD", "EXPECTED_TERMINATION", "received SIGTERM", False),  # ray stop
        ("DEAD", "AUTOSCALER_DRAIN_PREEMPTED", "spot notice", False),
        ("DEAD", "UNEXPECTED_TERMINATION", "health check failed", False),
        ("ALIVE", "", "", False),
    ],
)
def test_only_a_release_by_rays_autoscaler_is_one(
    state: str, reason: str, message: str, released: bool
) -> None:
    assert released_by_ray(_node(state, reason, message)) is released


def test_a_worker_whose_ray_ended_under_a_live_head_asks_and_leaves_as_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The probes' pace and the wait for a done record that never comes (15 s) decide
    # nothing here.
    monkeypatch.setattr(leaving, "PROBE_EVERY_S", 0.05)
    monkeypatch.setattr(leaving, "LEAVE_GRACE_S", 0.5)
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    asked: list[bool] = []

    def released() -> bool:
        asked.append(True)
        return True

    with pytest.raises(Released):
        wait_until_done(rdv, lambda: False, lambda: True, lambda _m: None, _signed, released)
    assert asked == [True]
    # A head that is gone is asked nothing: the done record decides, as before.
    assert wait_until_done(rdv, lambda: False, lambda: False, lambda _m: None, _signed) is None


@pytest.mark.parametrize(("target", "code"), [("aws", 75), ("gcp", 75), ("slurm", 0), ("local", 0)])
def test_a_released_node_exits_0_or_powers_its_vm_off(target: str, code: int) -> None:
    s = NodeSettings(
        cluster_id="c1", rank=1, nodes=2, rendezvous="file:///x", scratch=Path("/s"), target=target
    )
    assert released_status(s) == code
