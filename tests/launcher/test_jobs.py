"""Jobs on an ``up`` cluster through the rendezvous: submit, follow, list, cancel, fetch.

A real 3-node local cluster (file rendezvous), driven only through the ``syndeo`` CLI,
as a user would: the job's own module is imported by Ray tasks on the workers (the
work dir is shipped), its output comes back, its outputs/ files are fetched, a
cancelled job stops, and ``down`` stops a job still running.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import tarfile
import time
from pathlib import Path

import psutil
import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher import wheelhouse
from syndeo.launcher.job_client import pack_workdir
from syndeo.launcher.spec import launched_key
from syndeo.launcher.state import load_launched
from syndeo.rendezvous import JobSpec, Rendezvous, open_rendezvous
from syndeo.rendezvous.file import parse_file_uri
from tests.support.helpers import assert_nothing_left, one_line_error, reap, start_syndeo, syndeo
from tests.support.wheels import wheel

PROGRAM = """\
import os, sys, time, ray
import helper  # from the uploaded work dir, on the head and (below) on the workers

ray.init()
print("hello", os.environ.get("GREETING"), flush=True)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
where = ray.get([helper.where.options(scheduling_strategy=On(i, soft=False)).remote() for i in ids])
print("nodes used", len(set(where)), flush=True)
os.makedirs("outputs/sub", exist_ok=True)
with open("outputs/sub/answer.txt", "w") as fh:
    fh.write("42\\n")
sys.exit(int(os.environ.get("RC", "0")))
"""
HELPER = """\
import ray

@ray.remote(num_cpus=0.1)
def where():
    return ray.get_runtime_context().get_node_id()
"""
SLOW = "import time\nfor i in range(600):\n    print('tick', i, flush=True); time.sleep(0.5)\n"


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.py").write_text(PROGRAM)
    (work / "helper.py").write_text(HELPER)
    (work / "slow.py").write_text(SLOW)
    (work / ".gitignore").write_text("data/\n*.log\n")
    (work / "data").mkdir()
    (work / "data" / "big.bin").write_bytes(b"\0" * 1000)
    (work / "run.log").write_text("not uploaded")
    return work


def _members(archive: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return sorted(m.name for m in tar.getmembers())


def test_the_work_dir_is_packed_by_its_ignore_files_and_by_content(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref")
    (work / "link.py").symlink_to(work / "prog.py")
    one = pack_workdir(work, [])
    assert _members(one) == [".gitignore", "helper.py", "prog.py", "slow.py"]
    assert _members(pack_workdir(work, ["slow.py"])) == [".gitignore", "helper.py", "prog.py"]
    os.utime(work / "prog.py", (1, 1))  # a touched file: same content, same digest
    assert hashlib.sha256(pack_workdir(work, [])).digest() == hashlib.sha256(one).digest()
    (work / "prog.py").write_text(PROGRAM + "# changed\n")
    assert pack_workdir(work, []) != one


def test_a_work_dir_over_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    with (work / "huge.bin").open("wb") as fh:  # sparse: costs no disk
        fh.truncate(101 * 1024 * 1024)
    with pytest.raises(ConfigError, match=r"larger than 100 MiB .*\.syndeoignore") as exc:
        pack_workdir(work, [])
    assert "\n" not in str(exc.value)


def test_bad_input_is_one_line_before_anything_is_sent(tmp_path: Path, syndeo_home: Path) -> None:
    assert "no cluster is up" in one_line_error(syndeo("submit", "--", "true", cwd=tmp_path))
    err = one_line_error(syndeo("submit", "--cluster-id", "nope", "--", "true", cwd=tmp_path))
    assert "no cluster 'nope' is up" in err
    assert "nothing to run" in one_line_error(syndeo("submit", cwd=tmp_path))
    bad_env = syndeo("submit", "--env", "1X=2", "--", "true", cwd=tmp_path)
    assert "NAME=VALUE" in one_line_error(bad_env)
    assert "no cluster is up" in one_line_error(syndeo("jobs", cwd=tmp_path))


@pytest.mark.slow
def test_jobs_run_on_an_up_cluster_through_the_rendezvous(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "jobs-local"
    work = _workdir(tmp_path)
    try:
        up = syndeo(
            "up",
            "--nodes",
            "3",
            "--cluster-id",
            cid,
            "--join-timeout",
            "240",
            cwd=tmp_path,
            timeout=400,
        )
        assert up.returncode == 0, up.stderr[-3000:]

        # A job that succeeds: output followed to its end, exit status 0.
        done = syndeo(
            "submit",
            "--workdir",
            str(work),
            "--env",
            "GREETING=hi there",
            "--follow",
            "--",
            "python",
            "prog.py",
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        job = done.stdout.splitlines()[0]
        assert "hello hi there" in done.stdout
        assert "nodes used 3" in done.stdout  # helper.py was shipped to every node
        assert f"job {job} succeeded (exit 0)" in done.stderr

        # The same directory again: uploaded once (its digest is the key).
        workdirs = list(syndeo_home.rglob(f"{cid}/a0/workdirs/*.tar.gz"))
        assert len(workdirs) == 1
        fails = syndeo(
            "submit",
            "--workdir",
            str(work),
            "--env",
            "RC=3",
            "--follow",
            "--",
            "python",
            "prog.py",
            cwd=tmp_path,
            timeout=300,
        )
        assert fails.returncode == 3, fails.stderr[-2000:]
        assert len(list(syndeo_home.rglob(f"{cid}/a0/workdirs/*.tar.gz"))) == 1

        # Its output again, from the start; its files.
        logs = syndeo("logs", "--job", job, cwd=tmp_path)
        assert logs.returncode == 0 and "nodes used 3" in logs.stdout
        fetched = syndeo("fetch", "--job", job, "--out", str(tmp_path / "got"), cwd=tmp_path)
        assert fetched.returncode == 0, fetched.stderr
        assert (tmp_path / "got" / "sub" / "answer.txt").read_text() == "42\n"

        # Cancel a running job: it stops, its state and exit status say so.
        slow = syndeo("submit", "--workdir", str(work), "--", "python", "slow.py", cwd=tmp_path)
        assert slow.returncode == 0, slow.stderr
        slow_id = slow.stdout.strip()
        follower = start_syndeo("logs", "--job", slow_id, "--follow", cwd=tmp_path)
        assert follower.stdout is not None
        for line in follower.stdout:  # wait until it really runs
            if line.startswith("tick 2"):
                break
        cancel = syndeo("cancel", "--job", slow_id, cwd=tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        assert follower.wait(timeout=60) == 130

        listing = syndeo("jobs", cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        rows = {ln.split("│")[1].strip(): ln for ln in listing.stdout.splitlines() if "│ j" in ln}
        assert "succeeded" in rows[job] and "cancelled" in rows[slow_id]
        assert "failed" in next(r for k, r in rows.items() if k not in (job, slow_id))
        unknown = syndeo("logs", "--job", "j00000-000000", cwd=tmp_path)
        assert "no job j00000-000000" in one_line_error(unknown)
        assert "not a job id" in one_line_error(syndeo("cancel", "--job", "x;rm", cwd=tmp_path))

        # A job still running at `down` is stopped with the cluster.
        last = syndeo("submit", "--workdir", str(work), "--", "python", "slow.py", cwd=tmp_path)
        assert last.returncode == 0, last.stderr
        _wait_for_output(tmp_path, last.stdout.strip())
        drivers = [
            p for p in psutil.process_iter(["cmdline"]) if "slow.py" in (p.info["cmdline"] or [])
        ]
        assert drivers, "the job's driver is not running"
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        _gone, alive = psutil.wait_procs(drivers, timeout=30)
        assert not alive, "the job outlived down"
        assert_nothing_left(cid)
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)


def _wait_for_output(cwd: Path, job: str) -> None:
    follower = start_syndeo("logs", "--job", job, "--follow", cwd=cwd)
    assert follower.stdout is not None
    try:
        for line in follower.stdout:
            if line.startswith("tick 1"):
                return
        raise AssertionError(f"job {job} never printed")
    finally:
        follower.kill()
        follower.wait()


def _head_log(syndeo_home: Path, cid: str) -> Path:
    launched = json.loads((syndeo_home / "clusters" / cid / "launched.json").read_text())
    return Path(launched["part"]["logs"][0])


def _wait_in_log(log: Path, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{text!r} never in the head's log"
        time.sleep(0.2)


@pytest.mark.slow
def test_records_planted_in_the_store_never_run(tmp_path: Path, syndeo_home: Path) -> None:
    """Whoever can write the cluster's prefix but holds no launch key (a deployer, another
    cluster's nodes on a shared bucket) plants, with plain file writes as such a writer
    would: a job, a job signed for another attempt (replayed), and a cancel of a real
    job.  None is acted on, each is logged once, and the listing shows none of them."""
    cid = "jobs-planted"
    work = _workdir(tmp_path)
    marker = tmp_path / "planted-ran"
    try:
        up = syndeo(
            "up",
            "--nodes",
            "1",
            "--cluster-id",
            cid,
            "--join-timeout",
            "240",
            cwd=tmp_path,
            timeout=400,
        )
        assert up.returncode == 0, up.stderr[-3000:]
        launched = load_launched(cid)
        rdv = open_rendezvous(launched.rendezvous, cid)
        key = launched_key(launched)
        assert key is not None
        log = _head_log(syndeo_home, cid)
        store = Path(parse_file_uri(launched.rendezvous)) / cid / "a0"

        def plant(spec: JobSpec) -> None:
            (store / "jobs" / spec.job_id).mkdir(parents=True)
            (store / "jobs" / spec.job_id / "spec.json").write_text(spec.model_dump_json())
            (store / "ctl").mkdir(exist_ok=True)
            (store / "ctl" / f"job-{spec.job_id}").write_text("")

        evil = ["sh", "-c", f"echo pwned > {marker}"]
        base = {"cluster_id": cid, "command": evil, "submitted_at": time.time()}
        plant(JobSpec(job_id="j00001-aaaaaa", attempt=0, **base))  # unsigned
        plant(JobSpec(job_id="j00002-bbbbbb", attempt=1, **base).signed(key))  # replayed
        _wait_in_log(log, "ignoring job j00001-aaaaaa: its record is not signed")
        _wait_in_log(log, "ignoring job j00002-bbbbbb: its record is of attempt 1, not 0")

        # A real job, and a planted cancel of it: the job runs on.
        slow = syndeo("submit", "--workdir", str(work), "--", "python", "slow.py", cwd=tmp_path)
        assert slow.returncode == 0, slow.stderr
        slow_id = slow.stdout.strip()
        _wait_for_output(tmp_path, slow_id)
        (store / "ctl" / f"cancel-{slow_id}").write_text("")
        _wait_in_log(log, f"ignoring a cancel request for job {slow_id}: it is not a cancel")
        state = rdv.read_job_state(slow_id)
        assert state is not None and state.state == "running"
        # The launcher's own cancel, some control polls later, still works.
        assert syndeo("cancel", "--job", slow_id, cwd=tmp_path).returncode == 0
        _wait_in_log(log, f"job {slow_id} cancelled")

        assert not marker.exists(), "a planted job ran"
        text = log.read_text(errors="replace")
        for line in (
            "ignoring job j00001-aaaaaa",
            "ignoring job j00002-bbbbbb",
            f"ignoring a cancel request for job {slow_id}",
        ):
            assert text.count(line) == 1, text[-3000:]
        for planted in ("j00001-aaaaaa", "j00002-bbbbbb"):
            assert not (store / "jobs" / planted / "claim").exists()  # never claimed
            assert rdv.read_job_state(planted) is None
        listing = syndeo("jobs", cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        assert slow_id in listing.stdout and "j00001" not in listing.stdout
        assert "j00002" not in listing.stdout

        _the_head_serves_while_it_installs(tmp_path, rdv, store, key)
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)


HELD = """\
import heldpkg
print("held package imported", heldpkg.IMPORTED, flush=True)
"""


def _sealed_wheelhouse(tmp_path: Path, cid: str, key: str) -> tuple[str, bytes]:
    """The wheelhouse that `submit` makes of a links dir holding one wheel (``heldpkg``,
    the launcher's own archive of it: the same bytes, the same digest) and that
    wheelhouse sealed for this cluster as the launcher stores it."""
    links = tmp_path / "links"
    links.mkdir()
    name, data = wheel("heldpkg")
    (links / name).write_bytes(data)
    archive = tmp_path / "heldpkg.tar.gz"
    wheelhouse._tar([links / name], archive)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    sealing = open_rendezvous(f"file://{tmp_path}/sealing", cid, 0, key)
    assert sealing.put_wheelhouse_file(digest, archive)
    blob = tmp_path / "sealing" / cid / "a0" / "wheelhouses" / f"{digest}.tar.gz"
    return digest, blob.read_bytes()


def _reader_waits(fifo: Path, timeout: float) -> int:
    """Once something opened ``fifo`` to read it, a write end of it (the reader now
    waits in read() for bytes that only this test can give)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: no reader yet
            assert exc.errno == errno.ENXIO, exc
        assert time.monotonic() < deadline, f"nothing read {fifo} in {timeout:.0f} s"
        time.sleep(0.05)


def _the_head_serves_while_it_installs(
    tmp_path: Path, rdv: Rendezvous, store: Path, key: str
) -> None:
    """A job's packages whose read the test holds (the stored wheelhouse is a fifo that
    gives nothing until the test writes it): the head's status records go on being
    published, each a new one, while its install waits; released, the job runs with
    them.  (A head that installed inside its control loop would publish none.)"""
    digest, sealed = _sealed_wheelhouse(tmp_path, rdv.cluster_id, key)
    fifo = store / "wheelhouses" / f"{digest}.tar.gz"
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo, 0o600)
    os.chown(fifo, store.stat().st_uid, store.stat().st_gid)  # the nodes' user reads it
    work = tmp_path / "held"
    work.mkdir()
    (work / "prog.py").write_text(HELD)
    (work / "requirements.txt").write_text("heldpkg\n")
    env = {"PIP_FIND_LINKS": str(tmp_path / "links")}
    argv = ("submit", "--workdir", str(work), "--follow", "--", "python", "prog.py")
    proc = start_syndeo(*argv, cwd=tmp_path, env=env)
    try:
        writer = _reader_waits(fifo, 120)
        status = rdv.read_status()
        assert status is not None
        first, seen = status.seq, {status.seq}
        deadline = time.monotonic() + 60
        while len(seen) < 4:  # three more records while the install is held
            assert time.monotonic() < deadline, f"the head's status stalled: {sorted(seen)}"
            time.sleep(0.2)
            status = rdv.read_status()
            if status is not None:
                seen.add(status.seq)
        assert min(seen) == first and proc.poll() is None  # the job still waits
        os.set_blocking(writer, True)
        with os.fdopen(writer, "wb") as fh:
            fh.write(sealed)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    assert "nothing uploaded" in err, err  # the store's copy is the one held
    assert "held package imported True" in out, out
    # The job's log says what the node installed, the bytes it fetched, the seconds.
    figures = r"[0-9.]+ MiB fetched in [0-9.]+ s \([0-9.]+ MiB/s\), [0-9.]+ MiB installed in"
    assert re.search(rf"\[syndeo\]\s+rank 0: heldpkg 1\.0: {figures} [0-9.]+ s$", out, re.M), out
