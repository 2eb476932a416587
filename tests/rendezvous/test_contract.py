"""The rendezvous contract, run unchanged over every backend (file, s3, gs, az)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from syndeo.core import launchkey
from syndeo.core.errors import BlobTooLarge, RendezvousError, RendezvousTimeout
from syndeo.rendezvous import (
    ClaimRecord,
    Control,
    DoneRecord,
    HeadRecord,
    JobSpec,
    JobState,
    NodeRecord,
    PayloadRefused,
    Rendezvous,
    StatusRecord,
    passthrough_env,
)
from syndeo.rendezvous.base import GroupUnavailable, Unavailable
from syndeo.rendezvous.s3 import S3Rendezvous
from tests.rendezvous.conftest import Backend


def head(cluster: str = "c1", attempt: int = 0, created_at: float | None = None) -> HeadRecord:
    return HeadRecord(
        cluster_id=cluster,
        attempt=attempt,
        ip="10.0.0.1",
        gcs_port=6379,
        dashboard_port=8265,
        ray_version="2.60.0",
        syndeo_version="0.1.0",
        nonce=uuid.uuid4().hex,
        created_at=time.time() if created_at is None else created_at,
        hostname="head-host",
    )


def node(rank: int, cluster: str = "c1") -> NodeRecord:
    return NodeRecord(
        cluster_id=cluster,
        rank=rank,
        hostname=f"n{rank}",
        ip=f"10.0.{rank // 250}.{rank % 250}",
        pid=1000 + rank,
        joined_at=time.time(),
    )


# ---------------------------------------------------------------------- head
def test_check_accepts_a_usable_location(backend: Backend) -> None:
    """check() passes on a usable location, writes nothing a cluster would read, and the
    location it passed is then usable by every client (refusals: test_failures.py)."""
    if backend.kind == "file":
        # The cluster's dir made by the user, open to others: accepted, and tightened.
        root = os.path.join(backend.uri.removeprefix("file://"), "c1")
        os.makedirs(root, mode=0o755)
        os.chmod(root, 0o755)
    rv = backend.open()
    rv.check()
    if backend.kind == "file":
        assert os.stat(root).st_mode & 0o777 == 0o700
    assert (rv.read_claim(), rv.read_head(), rv.list_nodes()) == (None, None, [])
    assert (rv.read_status(), rv.read_done(), rv.stop_requested()) == (None, None, False)
    rec = head()
    backend.open().publish_head(rec)
    assert rv.read_head() == rec


def test_worker_waiting_sees_head_published_later(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = head()
    waiter = backend.open()
    looked = threading.Event()  # the waiter has looked and found no head: it is waiting
    read_head = waiter.read_head

    def probe(not_before: float | None = None) -> HeadRecord | None:
        found = read_head(not_before)
        if found is None:
            looked.set()
        return found

    monkeypatch.setattr(waiter, "read_head", probe)

    def publish() -> None:
        assert looked.wait(30)
        backend.open().publish_head(rec)

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        seen = waiter.wait_for_head(timeout_s=30, not_before=time.time())
    finally:
        publisher.join()
    assert looked.is_set()  # published while the waiter waited, not before
    assert seen == rec
    assert seen.address == "10.0.0.1:6379"


def test_exactly_one_winner_when_many_race_to_publish(backend: Backend) -> None:
    racers = 16
    for trial in range(3):
        cluster = f"race-{trial}"
        # One instance per racer, as on separate nodes; created before the race.
        rvs = [backend.open(cluster) for _ in range(racers)]
        records = [head(cluster) for _ in range(racers)]
        barrier = threading.Barrier(racers)

        def race(
            i: int,
            rvs: list[Rendezvous] = rvs,
            records: list[HeadRecord] = records,
            barrier: threading.Barrier = barrier,
        ) -> bool:
            barrier.wait()
            try:
                rvs[i].publish_head(records[i])
                return True
            except RendezvousError as exc:
                assert "already has a head" in str(exc)
                return False

        with ThreadPoolExecutor(racers) as pool:
            won = list(pool.map(race, range(racers)))
        assert won.count(True) == 1, f"trial {trial}: {won.count(True)} winners"
        stored = backend.open(cluster).read_head()
        assert stored == records[won.index(True)]


def claim(cluster: str = "c1", pid: int = 1) -> ClaimRecord:
    return ClaimRecord(
        cluster_id=cluster, hostname=f"launcher{pid}", pid=pid, claimed_at=time.time()
    )


def test_exactly_one_launcher_claims_a_cluster_id(backend: Backend) -> None:
    """Launchers given the same id race for it before launching: one winner, one-line losers."""
    racers = 12
    rvs = [backend.open("claimed") for _ in range(racers)]
    barrier = threading.Barrier(racers)

    def race(i: int) -> str:
        barrier.wait()
        try:
            rvs[i].claim(claim("claimed", pid=100 + i))
            return ""
        except RendezvousError as exc:
            return str(exc)

    with ThreadPoolExecutor(racers) as pool:
        outcomes = list(pool.map(race, range(racers)))
    assert outcomes.count("") == 1, outcomes
    winner = outcomes.index("")
    stored = backend.open("claimed").read_claim()
    assert stored is not None and stored.pid == 100 + winner
    for msg in outcomes:
        if msg:
            assert "'claimed' is already in use" in msg and f"(pid {100 + winner})" in msg
            assert "\n" not in msg
    # The claim is not per attempt (a requeue keeps it); cleanup of everything frees it.
    assert backend.open("claimed", attempt=1).read_claim() == stored
    with pytest.raises(RendezvousError):
        backend.open("claimed", attempt=1).claim(claim("claimed", pid=1))
    backend.open("claimed").cleanup()  # this attempt only: the claim stays
    assert backend.open("claimed").read_claim() == stored
    backend.open("claimed").cleanup(all_attempts=True)
    assert backend.open("claimed")._list("") == []
    backend.open("claimed").claim(claim("claimed", pid=2))
    backend.open("claimed").release_claim()
    assert backend.open("claimed").read_claim() is None


def test_200_concurrent_registrations_none_lost(backend: Backend) -> None:
    n = 200
    rvs = [backend.open() for _ in range(8)]  # shared by threads: backends are thread-safe
    barrier = threading.Barrier(n)

    def register(rank: int) -> None:
        barrier.wait()
        rvs[rank % len(rvs)].register_node(node(rank))

    threads = [threading.Thread(target=register, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    nodes = backend.open().list_nodes()
    assert [r.rank for r in nodes] == list(range(n))
    assert all(r == node(r.rank).model_copy(update={"joined_at": r.joined_at}) for r in nodes)


def test_node_forwarded_only_passthrough_env_reads_head(backend: Backend) -> None:
    """A node process that gets only ``env_passthrough`` (as under --cleanenv) finds the head."""
    rv = backend.open()
    rec = head()
    rv.publish_head(rec)
    env = {**passthrough_env(backend.uri), "PATH": os.environ["PATH"]}
    assert all(v in env for v in backend.env)  # the test server's settings are all forwarded
    code = (
        "import sys; from syndeo.rendezvous import open_rendezvous; "
        "print(open_rendezvous(sys.argv[1], 'c1').wait_for_head(20).model_dump_json())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, backend.uri],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert HeadRecord.model_validate_json(out.stdout) == rec


# ---------------------------------------------------------------------- stale records
def test_records_of_another_cluster_are_invisible(backend: Backend) -> None:
    a, ab = backend.open("a"), backend.open("ab")  # "a" is a prefix of "ab"
    a.publish_head(head("a"))
    a.register_node(node(1, "a"))
    a.put_secret("token", b"s3cr3t")
    assert ab.read_head() is None
    assert ab.list_nodes() == []
    assert ab.get_secret("token") is None


def test_record_naming_another_cluster_is_rejected(backend: Backend) -> None:
    rv = backend.open("c1")
    rv._write("a0/head.json", head("c2").model_dump_json().encode())
    rv._write("a0/nodes/1.json", node(1, "c2").model_dump_json().encode())
    assert rv.read_head() is None
    assert rv.list_nodes() == []


def test_older_attempt_is_ignored(backend: Backend) -> None:
    backend.open("c1", attempt=0).publish_head(head("c1", attempt=0))
    retry = backend.open("c1", attempt=1)
    assert retry.read_head() is None
    with pytest.raises(RendezvousTimeout):
        retry.wait_for_head(timeout_s=0.5)
    retry.cleanup_earlier_attempts()
    assert backend.open("c1", attempt=0).read_head() is None


def test_head_older_than_launch_is_stale(backend: Backend) -> None:
    now = time.time()
    rv = backend.open()
    rv.publish_head(head(created_at=now - 3600))
    assert rv.read_head(not_before=now) is None
    assert rv.read_head(not_before=now - 7200) is not None
    assert rv.read_head() is not None


def test_corrupt_record_reads_as_absent(backend: Backend) -> None:
    rv = backend.open()
    rv._write("a0/head.json", b"\x00not json")
    assert rv.read_head() is None


# ---------------------------------------------------------------------- payloads
def test_result_status_and_done_round_trip(backend: Backend) -> None:
    rv = backend.open()
    assert rv.get_result() is None and rv.read_status() is None and rv.read_done() is None
    payload = json.dumps({"throughput": [1.5] * 20000, "name": "héllo"}).encode()
    rv.put_result(payload)
    assert backend.open().get_result() == payload
    rv.put_result(b'{"replaced": true}')
    assert backend.open().get_result() == b'{"replaced": true}'
    status = StatusRecord(
        phase="running",
        nodes_expected=3,
        nodes_joined=[0, 1],
        progress={"step": 7},
        updated_at=time.time(),
    )
    rv.publish_status(status)
    assert backend.open().read_status() == status
    done = DoneRecord(exit_code=0, message="ok", finished_at=time.time(), lost_ranks=[2])
    rv.mark_done(done)
    assert backend.open().read_done() == done


def test_secret_is_created_once(backend: Backend) -> None:
    rv = backend.open()
    assert rv.get_secret("token") is None
    rv.put_secret("token", b"\x01\x02token")
    assert backend.open().get_secret("token") == b"\x01\x02token"
    with pytest.raises(RendezvousError, match="already exists"):
        backend.open().put_secret("token", b"other")
    assert rv.get_secret("token") == b"\x01\x02token"


def test_stop_request(backend: Backend) -> None:
    rv = backend.open()
    assert not rv.stop_requested()
    backend.open().request_stop("user pressed Ctrl-C")
    assert rv.stop_requested()


# ---------------------------------------------------------------------- cleanup
def test_cleanup_removes_every_key_of_this_cluster_only(backend: Backend) -> None:
    rv, other = backend.open("c1"), backend.open("c2")
    for r in (rv, other):
        r.publish_head(head(r.cluster_id))
        r.put_secret("token", b"t")
        for rank in range(1, 4):
            r.register_node(node(rank, r.cluster_id))
        r.put_result(b"{}")
        r.request_stop()
    later = backend.open("c1", attempt=1)
    later.publish_head(head("c1", attempt=1))
    rv.cleanup()
    assert rv._list("") == ["a1/head.json"]
    later.cleanup(all_attempts=True)
    assert rv._list("") == []
    assert len(other._list("")) == 7  # head, token, 3 nodes, result, stop
    other.cleanup()
    assert other._list("") == []


# ---------------------------------------------------------------------- deadlines
def test_wait_for_head_times_out_clearly(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not early, and not late by events rather than by a wall-clock bound (which a
    loaded machine stretches): no look at the store after the deadline but the last."""
    rv = backend.open("lonely")
    deadlines: list[float] = []
    looks: list[float] = []
    wait, read_head = rv.poller.wait, rv.read_head

    def watched_wait(probe: Any, deadline: float, on_timeout: Any) -> Any:
        deadlines.append(deadline)
        return wait(probe, deadline, on_timeout)

    def look(not_before: float | None = None) -> HeadRecord | None:
        looks.append(time.monotonic())
        return read_head(not_before)

    monkeypatch.setattr(rv.poller, "wait", watched_wait)
    monkeypatch.setattr(rv, "read_head", look)
    start = time.monotonic()
    with pytest.raises(RendezvousTimeout) as info:
        rv.wait_for_head(timeout_s=1.5)
    raised = time.monotonic()
    assert "lonely" in str(info.value) and backend.uri in str(info.value)
    assert "\n" not in str(info.value)
    (deadline,) = deadlines
    assert start + 1.5 <= deadline <= raised  # the whole timeout, never less
    assert looks and all(t < deadline for t in looks[:-1]), (deadline, looks)


# ---------------------------------------------------------------------- jobs and output
KEY = launchkey.new_key()


def job(job_id: str = "j00001-abcdef", cluster: str = "c1", attempt: int = 0) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        cluster_id=cluster,
        attempt=attempt,
        command=["python", "x.py"],
        env={"A": "1"},
        workdir_digest=None,
        submitted_at=time.time(),
    ).signed(KEY)


def test_control_is_one_list_of_stop_jobs_and_cancels(backend: Backend) -> None:
    rv = backend.open()
    assert rv.control() == Control()
    backend.open().submit_job(job("j00001-abcdef"))
    backend.open().submit_job(job("j00002-abcdef"))
    backend.open().request_cancel("j00001-abcdef", KEY)
    rv._write(rv._key("ctl/job-not-a-job-id"), b"")  # never reported
    ctl = rv.control()
    assert ctl == Control(jobs=["j00001-abcdef", "j00002-abcdef"], cancels=["j00001-abcdef"])
    rv.clear_doorbell("j00001-abcdef")
    rv.clear_cancel("j00001-abcdef")
    backend.open().request_stop("down")
    assert rv.control() == Control(stop=True, jobs=["j00002-abcdef"])
    assert rv.stop_requested()


def test_a_job_is_claimed_exactly_once(backend: Backend) -> None:
    backend.open().submit_job(job())
    with ThreadPoolExecutor(max_workers=8) as pool:
        wins = list(pool.map(lambda _: backend.open().claim_job("j00001-abcdef"), range(16)))
    assert wins.count(True) == 1
    with pytest.raises(RendezvousError, match="exists already"):
        backend.open().submit_job(job())


def test_job_records_of_another_cluster_or_attempt_are_never_read(backend: Backend) -> None:
    rv = backend.open("c1")
    with pytest.raises(RendezvousError, match="does not belong"):
        rv.submit_job(job(cluster="c2"))
    with pytest.raises(RendezvousError, match="does not belong"):
        rv.submit_job(job(attempt=1))
    # A record planted under this cluster's key that names another cluster: invisible.
    rv._write(
        rv._key("jobs/j00003-abcdef/spec.json"),
        job("j00003-abcdef", "c2").model_dump_json().encode(),
    )
    rv._write(rv._key("jobs/j00004-abcdef/spec.json"), b"{not json")
    assert rv.check_job_spec("j00003-abcdef", KEY) == (
        None,
        "its record names another job or cluster",
    )
    assert rv.check_job_spec("j00004-abcdef", KEY) == (None, "its record is not a job record")
    rv.submit_job(job("j00005-abcdef"))
    assert [s.job_id for s in rv.list_jobs(KEY)] == ["j00005-abcdef"]
    assert backend.open("c1", attempt=1).list_jobs(KEY) == []


def test_only_jobs_and_cancels_the_launch_key_signed_are_taken(backend: Backend) -> None:
    """Anyone who can write the prefix can put records there; none of theirs is taken."""
    rv = backend.open("c1")
    rv.submit_job(job("j00001-abcdef"))
    good, why = rv.check_job_spec("j00001-abcdef", KEY)
    assert why == "" and good is not None and good.command == ["python", "x.py"]
    unsigned = job("j00002-abcdef").model_copy(update={"signature": None})
    other_key = job("j00003-abcdef").signed(launchkey.new_key())
    changed = job("j00004-abcdef").model_copy(update={"command": ["sh", "-c", "cat ~/.ssh/*"]})
    # Signed, but for attempt 1: not replayed into attempt 0 (nor re-labelled: signed).
    replayed = job("j00005-abcdef", attempt=1)
    relabelled = job("j00006-abcdef", attempt=1).model_copy(update={"attempt": 0})
    for spec in (unsigned, other_key, changed, replayed, relabelled):
        rv._write(rv._key(f"jobs/{spec.job_id}/spec.json"), spec.model_dump_json().encode())
    bad = "its record is not signed with this launch's key"
    assert rv.check_job_spec("j00002-abcdef", KEY) == (None, bad)
    assert rv.check_job_spec("j00003-abcdef", KEY) == (None, bad)
    assert rv.check_job_spec("j00004-abcdef", KEY) == (None, bad)
    assert rv.check_job_spec("j00005-abcdef", KEY) == (None, "its record is of attempt 1, not 0")
    assert rv.check_job_spec("j00006-abcdef", KEY) == (None, bad)
    assert rv.check_job_spec("j00001-abcdef", None)[0] is None  # no key: nothing runs
    assert [s.job_id for s in rv.list_jobs(KEY)] == ["j00001-abcdef"]

    rv.request_cancel("j00001-abcdef", KEY)
    assert rv.check_cancel("j00001-abcdef", KEY) == ""
    rv._write(rv._key("ctl/cancel-j00001-abcdef"), b"")  # what a planter can write
    assert rv.check_cancel("j00001-abcdef", KEY) == "it is not a cancel request"
    backend.open("c1", attempt=1).request_cancel("j00001-abcdef", KEY)
    rv._write(
        rv._key("ctl/cancel-j00001-abcdef"),
        backend.open("c1", attempt=1)._read("a1/ctl/cancel-j00001-abcdef") or b"",
    )
    assert rv.check_cancel("j00001-abcdef", KEY) == "it is of attempt 1, not 0"
    rv.request_cancel("j00001-abcdef", launchkey.new_key())
    assert rv.check_cancel("j00001-abcdef", KEY) == "it is not signed with this launch's key"


def test_the_newest_signed_word_on_unavailable_groups_is_listed_and_taken(
    backend: Backend,
) -> None:
    rv, watcher = backend.open(), backend.open()
    small = {"small": GroupUnavailable(for_s=60.0, why="start refused (quota)")}
    watcher.put_unavailable(small, 1_000, KEY)
    watcher.put_unavailable({**small, "big": GroupUnavailable(for_s=None, why="bad")}, 1_001, KEY)
    ctl = rv.control()
    assert ctl.unavailable == 1_001  # the older record went
    assert rv._list(rv._key("ctl/unavailable-")) == [rv._key(f"ctl/unavailable-{1_001:016d}")]
    record = rv.read_unavailable(1_001, KEY)
    assert isinstance(record, Unavailable) and set(record.groups) == {"small", "big"}
    assert record.groups["big"].for_s is None
    assert rv.read_unavailable(1_001, None) == (
        "this node has no launch key to check its signature with"
    )
    assert rv.read_unavailable(1_001, launchkey.new_key()) == (
        "it is not signed with this launch's key"
    )
    assert rv.read_unavailable(999, KEY) == "it is not a record of unavailable groups"
    # Moved to another number, or from another attempt: not taken.
    raw = rv._read(rv._key(f"ctl/unavailable-{1_001:016d}")) or b""
    rv._write(rv._key(f"ctl/unavailable-{2_000:016d}"), raw)
    assert rv.read_unavailable(2_000, KEY) == "it names another cluster, attempt or number"
    backend.open("c1", attempt=1).put_unavailable(small, 3_000, KEY)
    rv._write(
        rv._key(f"ctl/unavailable-{3_000:016d}"),
        backend.open("c1", attempt=1)._read(f"a1/ctl/unavailable-{3_000:016d}") or b"",
    )
    assert rv.read_unavailable(3_000, KEY) == "it names another cluster, attempt or number"
    watcher.put_unavailable({}, 4_000, KEY)  # every group available again
    assert rv.control().unavailable == 4_000
    fresh = rv.read_unavailable(4_000, KEY)
    assert isinstance(fresh, Unavailable) and fresh.groups == {}


def test_the_ray_token_is_sealed_with_the_launch_key(backend: Backend) -> None:
    rv = backend.open("c1")
    rv.publish_token(b"the-ray-token", KEY)
    stored = rv.get_secret("token")
    assert stored is not None and b"the-ray-token" not in stored
    record = head("c1")
    fields = record.model_copy(
        update={"signature": launchkey.sign(KEY, record.model_dump(mode="json"), b"the-ray-token")}
    )
    rv.publish_head(fields)
    found = backend.open("c1").check_head(KEY)
    assert found.head is not None and found.token == b"the-ray-token"
    # Another launch's key opens neither the token nor the record.
    assert backend.open("c1").check_head(launchkey.new_key()).head is None


def test_a_blob_over_its_reader_s_limit_is_refused_unread(backend: Backend) -> None:
    rv = backend.open()
    rv._write(rv._key("big"), b"x" * 4096)
    assert rv._read(rv._key("big"), 4096) == b"x" * 4096
    with pytest.raises(BlobTooLarge, match="more than"):
        rv._read(rv._key("big"), 4095)
    assert rv._read(rv._key("absent"), 10) is None


def test_job_state_output_and_outputs_round_trip(backend: Backend) -> None:
    rv = backend.open()
    rv.submit_job(job())
    assert rv.read_job_state("j00001-abcdef") is None
    rv.put_job_state(JobState(job_id="j00001-abcdef", state="running", started_at=1.0))
    got: list[bytes] = []
    assert backend.open().read_job_output("j00001-abcdef", 0, got.append) == 0
    for seq, data in enumerate([b"line 1\n", b"line 2\n", b"\xff binary"]):
        rv.put_job_output("j00001-abcdef", seq, data)
    assert backend.open().read_job_output("j00001-abcdef", 1, got.append) == 3
    assert got == [b"line 2\n", b"\xff binary"]
    rv.put_job_outputs("j00001-abcdef", b"tar")
    rv.put_job_state(JobState(job_id="j00001-abcdef", state="succeeded", exit_code=0))
    reader = backend.open()
    assert reader.read_job_state("j00001-abcdef").state == "succeeded"  # type: ignore[union-attr]
    assert reader.get_job_outputs("j00001-abcdef") == b"tar"


def test_workload_output_chunks_in_order(backend: Backend) -> None:
    rv = backend.open()
    for seq in range(12):  # past 9: the keys sort as numbers
        rv.put_output(seq, f"{seq}\n".encode())
    got: list[bytes] = []
    assert backend.open().read_output(0, got.append) == 12
    assert b"".join(got) == b"".join(f"{i}\n".encode() for i in range(12))


def test_a_work_dir_is_stored_once_by_its_digest(backend: Backend) -> None:
    rv = backend.open()
    rv.put_workdir("d" * 64, b"archive")
    rv.put_workdir("d" * 64, b"another")  # same digest: nothing is written again
    assert backend.open().get_workdir("d" * 64) == b"archive"
    assert rv.get_workdir("e" * 64) is None


# ---------------------------------------------------------------------- sealed payloads
J2 = "j00002-abcdef"
MARK = b"plain-marker-0123456789"


@dataclass(frozen=True)
class Kind:
    """One kind of payload: how it is put and taken, and where it lands in the store."""

    put: Callable[[Rendezvous, bytes], None]
    take: Callable[[Rendezvous], bytes | None]  # its plain bytes; None: absent
    key: str
    # Put elsewhere -- another digest, chunk number, job, rank or attempt -- and the key
    # that lands at: moved from there to ``key``, it must be refused.
    elsewhere: tuple[tuple[int, Callable[[Rendezvous, bytes], None], str], ...]


def _chunks(read: Callable[[int, Callable[[bytes], None]], int]) -> bytes | None:
    got: list[bytes] = []
    read(0, got.append)
    return b"".join(got) if got else None


KINDS = {
    "workdir": Kind(
        lambda rv, d: rv.put_workdir("d" * 64, d),
        lambda rv: rv.get_workdir("d" * 64),
        f"a0/workdirs/{'d' * 64}.tar.gz",
        ((0, lambda rv, d: rv.put_workdir("e" * 64, d), f"a0/workdirs/{'e' * 64}.tar.gz"),),
    ),
    "wheelhouse": Kind(
        lambda rv, d: rv.put_wheelhouse("d" * 64, d),
        lambda rv: rv.get_wheelhouse("d" * 64),
        f"a0/wheelhouses/{'d' * 64}.tar.gz",
        ((0, lambda rv, d: rv.put_wheelhouse("e" * 64, d), f"a0/wheelhouses/{'e' * 64}.tar.gz"),),
    ),
    "result": Kind(
        lambda rv, d: rv.put_result(d),
        lambda rv: rv.get_result(),
        "a0/result.json",
        ((1, lambda rv, d: rv.put_result(d), "a1/result.json"),),
    ),
    "job-outputs": Kind(
        lambda rv, d: rv.put_job_outputs("j00001-abcdef", d),
        lambda rv: rv.get_job_outputs("j00001-abcdef"),
        "a0/jobs/j00001-abcdef/outputs.tar.gz",
        ((0, lambda rv, d: rv.put_job_outputs(J2, d), f"a0/jobs/{J2}/outputs.tar.gz"),),
    ),
    "output": Kind(
        lambda rv, d: rv.put_output(0, d),
        lambda rv: _chunks(rv.read_output),
        "a0/output/00000000",
        (
            (0, lambda rv, d: rv.put_output(1, d), "a0/output/00000001"),
            (1, lambda rv, d: rv.put_output(0, d), "a1/output/00000000"),
        ),
    ),
    "job-output": Kind(
        lambda rv, d: rv.put_job_output("j00001-abcdef", 0, d),
        lambda rv: _chunks(partial(rv.read_job_output, "j00001-abcdef")),
        "a0/jobs/j00001-abcdef/log/00000000",
        (
            (
                0,
                lambda rv, d: rv.put_job_output("j00001-abcdef", 1, d),
                "a0/jobs/j00001-abcdef/log/00000001",
            ),
            (0, lambda rv, d: rv.put_job_output(J2, 0, d), f"a0/jobs/{J2}/log/00000000"),
        ),
    ),
    "last-words": Kind(
        lambda rv, d: rv.put_log(1, d.decode()),
        lambda rv: None if 1 not in (logs := rv.read_logs()) else logs[1].encode(),
        "a0/logs/rank-1",
        ((0, lambda rv, d: rv.put_log(2, d.decode()), "a0/logs/rank-2"),),
    ),
}


def _refused(kind: Kind, rv: Rendezvous) -> bool:
    """True if ``rv`` refuses what is stored at ``kind.key``: the blob getters raise, a
    chunk is replaced by one line that says so, a node's last words are left out."""
    assert rv._read(kind.key) is not None, "nothing stored to refuse"
    try:
        got = kind.take(rv)
    except PayloadRefused as exc:
        assert "refused" in str(exc) and MARK.decode() not in str(exc)
        return True
    if got is None:
        return kind is KINDS["last-words"]
    assert MARK not in got, got
    return got.startswith(b"\n[syndeo: ") and b"is refused, not used" in got


@pytest.mark.parametrize("name", list(KINDS))
def test_every_payload_is_sealed_in_the_store_and_opens_with_the_launch_key(
    backend: Backend, name: str
) -> None:
    kind = KINDS[name]
    rv = backend.open()
    assert kind.take(rv) is None
    kind.put(rv, MARK + b" \xe2\x9c\x93")
    stored = rv._read(kind.key)
    assert stored is not None and MARK not in stored  # not the plain bytes
    assert kind.take(backend.open()) == MARK + b" \xe2\x9c\x93"


@pytest.mark.parametrize("name", list(KINDS))
def test_a_payload_not_sealed_by_this_launch_for_its_place_is_refused(
    backend: Backend, name: str
) -> None:
    kind = KINDS[name]
    rv = backend.open()
    # Sealed with another launch's key.
    kind.put(backend.open(launch_key=launchkey.new_key()), MARK)
    assert _refused(kind, rv)
    rv._delete_prefix(kind.key)
    # Sealed by another cluster (the same key), its blob copied here.
    other = backend.open("c2")
    kind.put(other, MARK)
    rv._write(kind.key, other._read(kind.key) or b"")
    assert _refused(kind, rv)
    # This launch's blob with one byte changed; plain bytes written as they are.
    rv._delete_prefix(kind.key)
    kind.put(rv, MARK)
    blob = bytearray(rv._read(kind.key) or b"")
    blob[-1] ^= 1
    rv._write(kind.key, bytes(blob))
    assert _refused(kind, rv)
    rv._write(kind.key, MARK)
    assert _refused(kind, rv)
    # Moved here from another place (digest, chunk number, job, rank, attempt).
    for attempt, put, there in kind.elsewhere:
        put(backend.open("c1", attempt), MARK)
        rv._write(kind.key, rv._read(there) or b"")
        rv._delete_prefix(there)  # moved, not copied
        assert _refused(kind, rv), there


@pytest.mark.parametrize("name", list(KINDS))
def test_a_rendezvous_without_a_launch_key_stores_and_hands_out_no_payload(
    backend: Backend, name: str
) -> None:
    kind = KINDS[name]
    keyless = backend.open(launch_key=None)
    with pytest.raises(PayloadRefused, match=r"no launch key .* SYNDEO_LAUNCH_KEY"):
        kind.put(keyless, MARK)
    assert keyless._list("") == []
    kind.put(backend.open(), MARK)
    with pytest.raises(PayloadRefused, match="`syndeo down` it and start it again"):
        kind.take(keyless)


def test_the_size_caps_count_the_plain_bytes(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A payload of exactly its cap is taken (the sealed blob is longer), one byte more is
    refused unread; an output chunk larger than a node writes is never shown."""
    from syndeo.rendezvous import base

    for cap in ("MAX_JOB_ARCHIVE", "MAX_WHEELHOUSE", "MAX_OUTPUTS"):
        monkeypatch.setattr(base, cap, 1000)
    rv = backend.open()
    for put, get, fits, over in (
        (rv.put_workdir, rv.get_workdir, "a" * 64, "b" * 64),
        (rv.put_wheelhouse, rv.get_wheelhouse, "a" * 64, "b" * 64),
        (rv.put_job_outputs, rv.get_job_outputs, "j00001-abcdef", J2),
    ):
        put(fits, b"x" * 1000)
        assert get(fits) == b"x" * 1000
        put(over, b"x" * 1001)
        with pytest.raises(BlobTooLarge, match="more than"):
            get(over)
    rv.put_output(0, b"y" * 3000)
    rv.put_output(1, b"z")
    monkeypatch.setattr(base, "MAX_OUTPUT_CHUNK", 2999)
    got: list[bytes] = []
    assert rv.read_output(0, got.append) == 2
    assert got[0].startswith(b"\n[syndeo: ") and b"more than" in got[0] and got[1] == b"z"


def test_a_wheelhouse_file_goes_through_the_store_and_back_whole(
    backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Streamed out of a file and back into one, sealed, on every backend: the same bytes,
    nothing for a digest the store does not hold, and a changed blob refused unkept."""
    import hashlib

    tmp = tmp_path_factory.mktemp("wheels")
    src = tmp / "wheels.tar.gz"
    src.write_bytes(os.urandom(17 * 2**20 + 17))  # more than two of S3's upload parts
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    rdv = backend.open()
    seen: list[int] = []
    assert rdv.put_wheelhouse_file(digest, src, seen.append)
    assert sum(seen) > src.stat().st_size and len(seen) >= 4  # record by record
    assert not rdv.put_wheelhouse_file(digest, src)  # there already
    got = tmp / "got"
    assert rdv.get_wheelhouse_file(digest, got, seen.append)
    assert got.read_bytes() == src.read_bytes()
    assert not rdv.get_wheelhouse_file("0" * 64, tmp / "none") and not (tmp / "none").exists()
    key = f"a0/wheelhouses/{digest}.tar.gz"
    if isinstance(rdv, S3Rendezvous):  # S3 and OSS: in parts, never whole in memory
        head = rdv.client.head_object(Bucket=rdv.bucket, Key=rdv._name(key))
        assert head["ETag"].strip('"').endswith("-3"), head["ETag"]
    blob = bytearray(rdv._read(key) or b"")
    blob[2 * 2**20] ^= 1
    rdv._write(key, bytes(blob))
    with pytest.raises(PayloadRefused):
        rdv.get_wheelhouse_file(digest, tmp / "changed")
    assert not (tmp / "changed").exists()
