"""How a joined worker learns its cluster is over (syndeo/node/leaving.py), without Ray.

Ray-side checks are plain callables here; the store is a real file rendezvous.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from syndeo.node.leaving import gcs_reachable, wait_until_done
from syndeo.rendezvous import DoneRecord, open_rendezvous


def test_a_worker_leaves_soon_after_the_head_with_its_done_record(tmp_path: Path) -> None:
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    head_up = threading.Event()
    head_up.set()

    def head_finishes() -> None:
        time.sleep(2)
        rdv.mark_done(DoneRecord(exit_code=0, message="ok", finished_at=time.time()))
        head_up.clear()  # the head stops its Ray right after writing done

    threading.Thread(target=head_finishes).start()
    t0 = time.monotonic()
    done = wait_until_done(rdv, lambda: True, head_up.is_set, lambda _m: None)
    assert done is not None and done.message == "ok"
    assert time.monotonic() - t0 < 10  # not the 30 s backoff, not Ray's 60 s


def test_the_store_being_unreadable_does_not_end_the_wait(tmp_path: Path) -> None:
    rdv = open_rendezvous(f"file://{tmp_path}/rv", "c1")
    rdv.check()
    broken = tmp_path / "rv" / "c1" / "a0" / "done.json"
    broken.mkdir(parents=True)  # every read of done fails (EISDIR -> RendezvousError)
    head_up = threading.Event()
    head_up.set()
    logs: list[str] = []

    def store_returns_then_head_finishes() -> None:
        time.sleep(4)
        broken.rmdir()
        rdv.mark_done(DoneRecord(exit_code=0, message="ok", finished_at=time.time()))
        head_up.clear()

    threading.Thread(target=store_returns_then_head_finishes).start()
    done = wait_until_done(rdv, lambda: True, head_up.is_set, logs.append)
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
