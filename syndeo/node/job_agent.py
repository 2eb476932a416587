"""The head's job agent (``up`` clusters): runs what ``submit`` put in the rendezvous.

It sees jobs in the same list of ``ctl/`` by which the head already learns of a stop
request, so an idle agent adds no request to the store.  A job is run only if its
record is well formed, names this cluster and attempt, is signed with this launch's key
(only the launcher holds it: whoever else can write the prefix cannot start work here),
and this agent wins its claim (an atomic create): then it runs through Ray's Job API on
the head itself, so the cluster's token never leaves the cluster.  Its output (Ray's
driver log, tailed) goes back in chunks; the files it leaves under ``outputs/`` are
uploaded when it ends.

Limits, so that a flood of jobs or a huge log cannot fill the node's disk or the
bucket: :data:`MAX_RUNNING` jobs at once (more are rejected, not queued here: Ray
queues what it is given), work dirs of at most ``MAX_JOB_ARCHIVE`` packed and
:data:`MAX_UNPACKED` unpacked, :data:`MAX_OUTPUTS` of outputs, and the output cap of
:mod:`syndeo.node.output_stream`.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syndeo.core.archive import MAX_MEMBERS
from syndeo.core.errors import BlobTooLarge, RendezvousError
from syndeo.node import wheelhouse, workdir
from syndeo.node.output_stream import OutputStream
from syndeo.rendezvous import (
    Control,
    JobSpec,
    JobState,
    PayloadRefused,
    ReadyRecord,
    Rendezvous,
    WantedRecord,
)
from syndeo.rendezvous.base import MAX_OUTPUTS, JobPhase

MAX_RUNNING = 8
TAIL_S = 0.25
# How long a job's packages may take to reach every joined node before the job fails.
INSTALL_TIMEOUT_S = 1800.0


@dataclass
class _Job:
    spec: JobSpec
    submission_id: str
    work: Path
    stream: OutputStream
    started_at: float
    wheels: dict[str, str] = field(default_factory=dict)  # its packages, by architecture
    cancelled: bool = False
    stop_tail: threading.Event = field(default_factory=threading.Event)
    tail: threading.Thread | None = None


@dataclass
class _Installing:
    """A job whose packages the nodes are installing: submitted to Ray once every joined
    node has them."""

    spec: JobSpec
    work: Path
    wheels: dict[str, str]  # the wheelhouse's digest by architecture
    deadline: float


def _pack_outputs(outputs: Path) -> bytes | None:
    if not outputs.is_dir():
        return None
    files = [p for p in sorted(outputs.rglob("*")) if p.is_file() and not p.is_symlink()]
    if not files:
        return None
    if len(files) > MAX_MEMBERS:
        raise ValueError(f"outputs/ holds more than {MAX_MEMBERS} files: not uploaded")
    if sum(p.stat().st_size for p in files) > MAX_OUTPUTS:
        raise ValueError(f"outputs/ holds more than {MAX_OUTPUTS >> 20} MiB: not uploaded")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in files:
            tar.add(p, arcname=p.relative_to(outputs).as_posix(), recursive=False)
    return buf.getvalue()


class JobAgent:
    def __init__(
        self,
        rdv: Rendezvous,
        launch_key: str | None,
        dashboard: str,
        ray_temp_dir: Path,
        scratch: Path,
        log: Callable[[str], None],
        installer: wheelhouse.Installer | None = None,
        joined: Callable[[], set[int]] = set,
    ) -> None:
        self.rdv, self.launch_key, self.log = rdv, launch_key, log
        # Ray's dashboard on the head's own 127.0.0.1 ("" = started without it).
        self.dashboard = dashboard.split("//")[-1]
        self.ray_temp_dir, self.jobs_dir = ray_temp_dir, scratch / "jobs"
        # The jobs' packages (submit --requirements): every node installs them (the head
        # through ``installer``, beside this loop); ``joined``: the ranks that must have
        # them before a job that needs them goes to Ray.
        self.installer, self.joined = installer, joined
        self.wanted: dict[str, list[str]] | None = None
        self.installing: dict[str, _Installing] = {}
        self.running: dict[str, _Job] = {}
        self.seen: set[str] = set()
        self.told: set[tuple[int, str]] = set()  # (rank, note) said in a job's log already
        # Cancel requests refused, by job and reason: each is said once, however often
        # a planter writes it again.
        self.refused: set[tuple[str, str]] = set()
        self._client: Any = None

    # ------------------------------------------------------------------ Ray's Job API
    def client(self) -> Any:
        if self._client is None:
            # Imported here: the agent runs only on the head of an `up` cluster.  The
            # client adds the cluster's token from RAY_AUTH_* (set by the head).
            from ray.job_submission import JobSubmissionClient

            self._client = JobSubmissionClient(f"http://{self.dashboard}")
        return self._client

    # ------------------------------------------------------------------ the loop
    def on_control(self, ctl: Control) -> None:
        for job_id in ctl.jobs:
            if job_id not in self.seen:
                self.seen.add(job_id)
                self._safely(job_id, lambda j=job_id: self._start(j))  # type: ignore[misc]
        for job_id in ctl.cancels:
            try:
                why = self.rdv.check_cancel(job_id, self.launch_key)
            except RendezvousError:
                continue  # the store has a bad moment: the request is still there next time
            job = self.running.get(job_id)
            if why:
                if (job_id, why) not in self.refused:
                    self.refused.add((job_id, why))
                    self.log(f"ignoring a cancel request for job {job_id}: {why}")
            elif job_id in self.installing:
                pending = self.installing[job_id]
                self._drop(job_id)
                why = "cancelled while its packages were installed"
                self._reject(pending.spec, why, pending.work)
            elif job is not None and not job.cancelled:
                job.cancelled = True
                self._safely(job_id, lambda j=job: self.client().stop_job(j.submission_id))  # type: ignore[misc]
            with contextlib.suppress(RendezvousError):
                self.rdv.clear_cancel(job_id)

    def tick(self) -> None:
        """Notice jobs that ended (called about once a second)."""
        for job_id, job in list(self.running.items()):
            self._safely(job_id, lambda j=job: self._check(j))  # type: ignore[misc]
        for job_id, pending in list(self.installing.items()):
            self._safely(job_id, lambda p=pending: self._installed(p))  # type: ignore[misc]

    def signal_all(self, signum: int) -> int:
        """Send ``signum`` to every running job's driver (its process group: Ray starts
        each driver in a session of its own); how many got it."""
        sent = 0
        for job in list(self.running.values()):
            try:
                pid = self.client().get_job_info(job.submission_id).driver_info.pid
                os.killpg(int(pid), signum)
                sent += 1
            except Exception as exc:  # one job's trouble never ends the cluster
                self.log(f"job {job.spec.job_id}: could not signal its driver: {exc}")
        return sent

    def stop_all(self) -> None:
        """The cluster is stopping: its jobs end with it (and say so)."""
        if self.installer is not None:
            self.installer.stop()
        for job_id, pending in list(self.installing.items()):
            self._drop(job_id)
            self._reject(pending.spec, "the cluster was stopped", pending.work)
        for job in list(self.running.values()):
            job.cancelled = True
            with contextlib.suppress(Exception):
                self.client().stop_job(job.submission_id)
            self._finish(job, JobPhase.CANCELLED, None, "the cluster was stopped")

    def _safely(self, job_id: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # one job's trouble never ends the cluster
            why = f"{type(exc).__name__}: {exc}"
            self.log(f"job {job_id}: {why}")
            job = self.running.get(job_id)
            if job is not None:
                self._finish(job, JobPhase.FAILED, None, why)
            else:  # it never started: say so, or its followers wait forever
                if job_id in self.installing:
                    self._drop(job_id)
                with contextlib.suppress(Exception):
                    self.rdv.put_job_state(
                        JobState(
                            job_id=job_id, state=JobPhase.FAILED, message=why, ended_at=time.time()
                        )
                    )

    # ------------------------------------------------------------------ one job
    def _start(self, job_id: str) -> None:
        spec = self._claim(job_id)
        if spec is None:
            return
        why = self._cannot_run_more()
        if why:
            self._reject(spec, why)
            return
        work = self.jobs_dir / job_id / "work"
        work.mkdir(parents=True, mode=0o700)
        if spec.workdir_digest is not None:
            why = self._unpack_workdir(spec.workdir_digest, work)
            if why:
                self._reject(spec, why, work)
                return
        wheels = spec.wheelhouses or (
            {"x86_64": spec.wheelhouse_digest} if spec.wheelhouse_digest else {}
        )
        if not wheels:
            self._submit(job_id, spec, work, {})
            return
        # Installed on every node beside this loop; submitted to Ray when they are.
        deadline = time.monotonic() + INSTALL_TIMEOUT_S
        self.installing[job_id] = _Installing(spec, work, wheels, deadline)
        self._publish_wanted()
        self.rdv.put_job_state(JobState(job_id=job_id, state=JobPhase.INSTALLING))
        shown = ", ".join(f"{a} {d[:12]}" for a, d in sorted(wheels.items()))
        self.log(f"job {job_id}: its packages ({shown}) go to the nodes")

    def _claim(self, job_id: str) -> JobSpec | None:
        """The job's spec if this agent is to run it: signed by this launch's launcher for
        this cluster and attempt, and claimed here first."""
        spec, why = self.rdv.check_job_spec(job_id, self.launch_key)
        if spec is None:
            # Not a job this launch's launcher signed for this cluster and attempt: never
            # run, never claimed (the claim would keep the real one from running).
            self.log(f"ignoring job {job_id}: {why}")
            with contextlib.suppress(RendezvousError):
                self.rdv.clear_doorbell(job_id)
            return None
        claimed = self.rdv.claim_job(job_id)
        # Best effort: the claim, not the doorbell, makes a job run once (and this agent
        # remembers what it has seen), so a doorbell that stays costs nothing.
        with contextlib.suppress(RendezvousError):
            self.rdv.clear_doorbell(job_id)
        # Not claimed: already taken (an earlier head of this attempt ran it).
        return spec if claimed else None

    def _cannot_run_more(self) -> str | None:
        """Why no job can start now, if none can."""
        if not self.dashboard:
            return (
                "this cluster runs without Ray's dashboard (`up --no-dashboard`), "
                "which Ray's Job API needs"
            )
        if len(self.running) + len(self.installing) >= MAX_RUNNING:
            return f"{MAX_RUNNING} jobs are running already; submit it again later"
        return None

    def _unpack_workdir(self, digest: str, work: Path) -> str | None:
        """Fetch the job's work dir archive into ``work``; why not, if it cannot be."""
        try:
            archive = self.rdv.get_workdir(digest)
        except BlobTooLarge as exc:
            return f"its work dir is too large: {exc}"
        except PayloadRefused as exc:
            return str(exc)
        return workdir.unpack(archive, digest, work)

    def _publish_wanted(self) -> None:
        """The digests the jobs waiting for or running with packages need, signed, for
        every node (syndeo/node/wheelhouse.py: Installer), when that set changed."""
        by_arch: dict[str, set[str]] = {}
        for wheels in [p.wheels for p in self.installing.values()] + [
            j.wheels for j in self.running.values()
        ]:
            for arch, digest in wheels.items():
                by_arch.setdefault(arch, set()).add(digest)
        wanted = {arch: sorted(digests) for arch, digests in sorted(by_arch.items())}
        if wanted == self.wanted or self.launch_key is None:
            return
        record = WantedRecord(
            cluster_id=self.rdv.cluster_id,
            attempt=self.rdv.attempt,
            digests=wanted,
            updated_at=time.time(),
        )
        self.rdv.put_wanted(record.signed(self.launch_key))
        self.wanted = wanted

    def _drop(self, job_id: str) -> None:
        self.installing.pop(job_id, None)
        with contextlib.suppress(RendezvousError):
            self._publish_wanted()

    def _installed(self, pending: _Installing) -> None:
        """Submit the job once every joined node has its packages; fail it with the first
        node's reason, or when they take too long."""
        job_id, missing, said = pending.spec.job_id, [], []
        ranks = set(self.joined()) | ({self.installer.s.rank} if self.installer else set())
        for rank in sorted(ranks):
            ready = self.rdv.read_ready(rank)
            why = self._not_for(rank, ready, pending.wheels)
            if why:
                self._drop(job_id)
                self._reject(pending.spec, why, pending.work)
                return
            if ready is None or pending.wheels[ready.arch] not in ready.digests:
                missing.append(rank)
            else:
                said.append(self._said_by(rank, ready.notes.get(pending.wheels[ready.arch], "")))
        if not missing:
            self.installing.pop(job_id)
            self._submit(job_id, pending.spec, pending.work, pending.wheels, said)
        elif time.monotonic() > pending.deadline:
            self._drop(job_id)
            shown = ", ".join(map(str, missing))
            why = f"its packages not installed in {INSTALL_TIMEOUT_S:.0f} s on rank(s) {shown}"
            self._reject(pending.spec, why, pending.work)

    def _said_by(self, rank: int, note: str) -> str:
        """A line of the job's log: what the node of ``rank`` did to have its packages
        (said for the first job that needed them; a later one finds them there)."""
        if not note or (rank, note) in self.told:
            return f"rank {rank}: installed already (for an earlier job)"
        self.told.add((rank, note))
        return f"rank {rank}: {note}"

    @staticmethod
    def _not_for(rank: int, ready: ReadyRecord | None, wheels: dict[str, str]) -> str:
        """Why the node of ``rank`` cannot have the job's packages ("": it can)."""
        if ready is None:
            return ""
        if ready.arch not in wheels:
            return (
                f"rank {rank} is {ready.arch}, and its packages were resolved for "
                f"{', '.join(sorted(wheels))} only (set the group's arch)"
            )
        failed = ready.failed.get(wheels[ready.arch])
        return f"its packages on rank {rank}: {failed}" if failed else ""

    def _submit(
        self,
        job_id: str,
        spec: JobSpec,
        work: Path,
        wheels: dict[str, str],
        said: list[str] | None = None,
    ) -> None:
        """Hand the job to Ray's Job API, say it runs (and ``said``: how its packages came
        to the nodes), and tail its driver log."""
        submission_id = f"syndeo-{job_id}"
        stream = OutputStream(
            lambda seq, data: self.rdv.put_job_output(job_id, seq, data),
            on_error=lambda msg: self.log(f"job {job_id}: {msg}"),
        )
        job = _Job(spec, submission_id, work, stream, time.time(), wheels)
        self.running[job_id] = job
        if wheels:  # said first in the job's own log
            shown = ", ".join(f"{a} {d[:12]}" for a, d in sorted(wheels.items()))
            stream.feed(f"[syndeo] packages ({shown}) installed on every node\n".encode())
            for line in said or []:
                stream.feed(f"[syndeo]   {line}\n".encode())
        # The driver runs in the unpacked dir (so outputs/ is where we look); Ray also
        # ships it to the workers as their working dir, so the job's modules import there.
        # `python` in the command must be the interpreter that has Ray (as for --run).
        bindir = shlex.quote(str(Path(sys.executable).parent))
        entrypoint = (
            f'cd {shlex.quote(str(work))} && export PATH={bindir}:"$PATH" '
            f"&& exec {shlex.join(spec.command)}"
        )
        env_vars = dict(spec.env)
        if wheels:
            # Each node's own installed copy: Ray expands ${SYNDEO_PYLIBS} (set for Ray's
            # processes on every node) in each worker's environment.  One directory per
            # architecture: a node has its own only, and Python skips the others.
            rest = env_vars.get("PYTHONPATH", "${PYTHONPATH}")
            dirs = [f"${{{wheelhouse.PYLIBS_VAR}}}/{d}" for _a, d in sorted(wheels.items())]
            env_vars["PYTHONPATH"] = ":".join([*dirs, rest])
        runtime_env: dict[str, Any] = {"working_dir": str(work), "env_vars": env_vars}
        self.client().submit_job(
            entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env
        )
        self.rdv.put_job_state(
            JobState(job_id=job_id, state=JobPhase.RUNNING, started_at=job.started_at)
        )
        job.tail = threading.Thread(target=self._tail, args=(job,), daemon=True)
        job.tail.start()
        self.log(f"job {job_id} started: {shlex.join(spec.command)}")

    def _tail(self, job: _Job) -> None:
        """Ray's driver log of the job, as it grows (the head's own file: no API calls)."""
        path = self.ray_temp_dir / "session_latest" / "logs" / f"job-driver-{job.submission_id}.log"
        fh = None
        try:
            while True:
                stopping = job.stop_tail.is_set()
                if fh is None and path.exists():
                    fh = path.open("rb")
                if fh is not None:
                    while chunk := fh.read(65536):
                        job.stream.feed(chunk)
                if stopping:
                    return
                job.stop_tail.wait(TAIL_S)
        finally:
            if fh is not None:
                fh.close()

    def _check(self, job: _Job) -> None:
        from ray.job_submission import JobStatus

        info = self.client().get_job_info(job.submission_id)
        if not JobStatus(info.status).is_terminal():
            return
        exit_code = getattr(info, "driver_exit_code", None)
        if job.cancelled or info.status == JobStatus.STOPPED:
            self._finish(job, JobPhase.CANCELLED, exit_code, "")
        elif info.status == JobStatus.SUCCEEDED:
            self._finish(job, JobPhase.SUCCEEDED, 0 if exit_code is None else exit_code, "")
        else:
            # Ray's message repeats the log's tail: its first line says what happened.
            self._finish(job, JobPhase.FAILED, exit_code, (info.message or "").split(",")[0][:300])

    def _finish(self, job: _Job, state: JobPhase, exit_code: int | None, message: str) -> None:
        job_id = job.spec.job_id
        if self.running.pop(job_id, None) is None:
            return
        if job.wheels:
            with contextlib.suppress(RendezvousError):
                self._publish_wanted()  # the nodes keep their copy for a later job
        job.stop_tail.set()
        if job.tail is not None:
            job.tail.join(timeout=10)
        job.stream.close()
        outputs = False
        try:
            archive = _pack_outputs(job.work / "outputs")
            if archive is not None:
                self.rdv.put_job_outputs(job_id, archive)
                outputs = True
        except (OSError, ValueError) as exc:
            message = f"{message}; {exc}".strip("; ")
        self.rdv.put_job_state(
            JobState(
                job_id=job_id,
                state=state,
                message=message,
                started_at=job.started_at,
                ended_at=time.time(),
                exit_code=exit_code,
                log_bytes=job.stream.bytes_taken,
                outputs=outputs,
            )
        )
        shutil.rmtree(job.work.parent, ignore_errors=True)
        self.log(
            f"job {job_id} {state}" + (f" (exit {exit_code})" if exit_code is not None else "")
        )

    def _reject(self, spec: JobSpec, why: str, work: Path | None = None) -> None:
        if work is not None:
            shutil.rmtree(work.parent, ignore_errors=True)
        self.rdv.put_job_state(
            JobState(
                job_id=spec.job_id,
                state=JobPhase.REJECTED,
                message=why,
                ended_at=time.time(),
            )
        )
        self.log(f"job {spec.job_id} rejected: {why}")
