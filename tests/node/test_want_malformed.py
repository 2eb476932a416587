"""A ``want.json`` that is not the autoscaler provider's (syndeo/node/autoscale.py).

The file lies in the head's scratch, which every task can write.  Whatever is written
there, the head takes it as no demand, says so once, and goes on: its signed demand and
its status record are still published (the real file rendezvous), the ranks let go are
none.  The provider's own file still counts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core.nodeconfig import NodeSettings
from syndeo.node import autoscale
from syndeo.node.workload import Monitor
from syndeo.rendezvous import open_rendezvous

KEY = "ab" * 32

MALFORMED = {
    "1e400": b'{"seq": 1e400, "want": {"cpu": 1}, "release": []}',
    "Infinity": b'{"seq": 1, "want": {"cpu": Infinity}, "release": []}',
    "-Infinity": b'{"seq": 1, "want": {}, "release": [-Infinity]}',
    "NaN": b'{"seq": NaN, "want": {}, "release": []}',
    "a float": b'{"seq": 1, "want": {"cpu": 1.5}, "release": []}',
    "5000 digits": b'{"seq": 1' + b"0" * 5000 + b', "want": {}, "release": []}',
    "too large": b'{"seq": 1, "want": {"cpu": 100000000000000000000}, "release": []}',
    "negative": b'{"seq": 1, "want": {}, "release": [-1]}',
    "want a list": b'{"seq": 1, "want": [1, 2], "release": []}',
    "want null": b'{"seq": 1, "want": null, "release": []}',
    "count a string": b'{"seq": 1, "want": {"cpu": "3"}, "release": []}',
    "release a string": b'{"seq": 1, "want": {}, "release": "12"}',
    "release of bools": b'{"seq": 1, "want": {}, "release": [true]}',
    "seq a string": b'{"seq": "1", "want": {}, "release": []}',
    "a list": b"[1, 2]",
    "null": b"null",
    "empty": b"",
    "not JSON": b"\xff\xfe{",
    "nested deep": b"[" * 100_000,
    "over 1 MiB": b'{"seq": 1, "want": {}, "release": [' + b"1, " * 400_000 + b"1]}",
}


@pytest.fixture
def head(tmp_path: Path) -> Iterator[NodeSettings]:
    scratch = Path(f"/tmp/sy-want-{tmp_path.name[-12:]}")
    s = NodeSettings.model_validate(
        {"cluster_id": "want", "rank": 0, "nodes": 1, "scratch": str(scratch)}
        | {"rendezvous": (tmp_path / "rdv").as_uri(), "launch_key": KEY}
        | {"autoscale": "cpu:0:4:1:0:"}
    )
    autoscale.want_path(scratch).parent.mkdir(parents=True)
    yield s
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_want_is_no_demand_said_once(
    head: NodeSettings, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    autoscale.want_path(head.scratch).write_bytes(content)
    rdv = open_rendezvous(head.rendezvous, head.cluster_id)
    monitor = Monitor(head, rdv, "127.0.0.1:1", head.scratch / "token", None)  # type: ignore[arg-type]
    for _ in range(3):  # as the head's loop does, every status
        monitor.demand_changed()
        monitor.publish("serving", force=True)
        assert autoscale.released(head) == set()
    status = rdv.read_status()
    assert status is not None and status.phase == "serving"
    demand = status.demand
    assert demand is not None and demand.verified(KEY, head.cluster_id, head.attempt)
    assert (demand.seq, demand.want, demand.release) == (0, {}, [])
    said = [ln for ln in capsys.readouterr().err.splitlines() if "want.json" in ln]
    assert len(said) == 1 and "taken as no demand" in said[0], said
    # The provider's own file, written over it, counts again.
    autoscale.write_want(autoscale.want_path(head.scratch), 7, {"cpu": 2}, [3])
    monitor.publish("serving", force=True)
    status = rdv.read_status()
    assert status is not None and status.demand is not None
    assert (status.demand.seq, status.demand.want, status.demand.release) == (7, {"cpu": 2}, [3])
    assert autoscale.released(head) == {3}


@pytest.mark.parametrize(
    ("raw", "ranks"),
    [
        (b"[3, 1]", {1, 3}),
        (b"[1, 2]", {1}),
        (b"[1e400]", set()),
        (b"[-1]", set()),
        (b"[true]", set()),
        (b'{"1": 1}', set()),
        (b"[1" + b"0" * 5000 + b"]", set()),
        (b"\xff", set()),
    ],
)
def test_the_idle_drains_file_is_a_list_of_ranks_or_none(
    raw: bytes, ranks: set[int], head: NodeSettings
) -> None:
    """Written by the provider, writable by any task: anything but ranks is no rank, and
    a rank outside the groups that follow demand (rank 2 of a fixed-size group here) is
    never one: its spot notice still counts."""
    autoscale.idle_drain_path(head.scratch).write_bytes(raw)
    groups: dict[int, str | None] = {1: "cpu", 2: "fixed", 3: "cpu"}
    assert autoscale.idle_drains(head, groups) == ranks
