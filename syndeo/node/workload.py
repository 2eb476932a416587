"""What the head does once Ray is up: readiness, the workload, status, teardown record.

The :class:`Monitor` is a small Ray driver inside ``syndeo node`` on rank 0.  It
counts nodes by the labels each node started with (so "missing ranks 2, 3" can be
named), publishes status for launchers to follow, and notices lost nodes.  The
workload itself is any command -- the built-in benchmark or the user's script --
run as a child with ``RAY_ADDRESS`` and the token set, so plain ``ray.init()``
inside it connects.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from syndeo.core.errors import JoinTimeout, NodeError, RendezvousError, WorkloadError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.core.poll import Poller
from syndeo.node import autoscale, poweroff, wheelhouse, workdir
from syndeo.node.groupwatch import GroupWatch
from syndeo.node.job_agent import JobAgent
from syndeo.node.leaving import released_by_ray
from syndeo.node.output_stream import OutputStream
from syndeo.node.raynode import RayProcess, child_env
from syndeo.rendezvous import (
    Control,
    DoneRecord,
    InterruptRecord,
    PayloadRefused,
    Rendezvous,
    StatusRecord,
)
from syndeo.rendezvous.base import NO_PAYLOAD_KEY, Phase
from syndeo.rendezvous.tolerant import Tolerant, retry_until

# While a workload runs the head's loop ticks every TICK_S (the workload's exit is
# noticed at once), asks Ray about its nodes every HEALTH_EVERY_S and touches the
# store only for status and the stop flag: ~1 request/s per cluster, not per node.
TICK_S = 0.25
HEALTH_EVERY_S = 1.0
STATUS_EVERY_S = 2.0
STOP_EVERY_S = 2.0
GCS_TIMEOUT_S = 10.0
# A result or done record the store cannot take right now waits on this node's
# disk and is retried this long (an outage of minutes must not lose hours of work).
DELIVER_DEADLINE_S = 1800.0
# A node that got a spot notice drains in Ray first and writes its record a moment
# later: the head, which sees the drain in Ray's GCS, reads the record at most once a
# second for this long (and only then: an idle cluster costs the store nothing more).
INTERRUPT_READ_FOR_S = 30.0
# How long the head looks for the notice record of a node lost without draining first.
LOST_NOTICE_READ_S = 10.0


# Set by SIGUSR1 to the node (syndeo.node.main): the scheduler warns of the time limit.
# The head passes it on, once, as SIGUSR1 to the workload's process group and to every
# running `submit` job's driver: their checkpoint hook.
WARNED = threading.Event()
# A warning that came while the cluster was still starting reaches the workload only
# after this long: a program installs its SIGUSR1 handler as it starts, and the signal
# before that would end it (its default action), checkpoint unsaved.
WARN_AFTER_START_S = 3.0


def log(s: NodeSettings, msg: str) -> None:
    print(f"[syndeo {s.cluster_id} r{s.rank}] {msg}", file=sys.stderr, flush=True)


def _deliver(fn: Callable[[], None], what: str, deadline_s: float = DELIVER_DEADLINE_S) -> None:
    """Write what must not be lost, waiting out an outage of up to ``deadline_s``."""
    retry_until(
        fn,
        deadline_s,
        lambda msg: print(f"[syndeo] {msg}", file=sys.stderr, flush=True),
        what,
    )


class Monitor:
    def __init__(
        self, s: NodeSettings, rdv: Rendezvous, address: str, token_path: Path, ray_proc: RayProcess
    ) -> None:
        self.s, self.rdv, self.address = s, rdv, address
        self.token_path, self.ray_proc = token_path, ray_proc
        self.ever_joined: set[int] = set()
        self.first_seen: dict[int, float] = {}
        self.lost: set[int] = set()  # joined, and gone now (a replacement clears it)
        self.lost_ever: set[int] = set()  # every rank lost during the run
        self.progress: dict[str, Any] = {}
        self._connected = False
        self._gcs: Any = None
        self._last_status = 0.0
        self.dashboard_url = ""
        # Status and the stop flag are not worth a running workload: degrade instead.
        self.store = Tolerant(lambda msg: log(s, msg))
        self.workload_started = False
        self.stopped = False  # the launcher asked the workload to stop
        self.warned = False  # the time-limit warning was passed on
        # Node groups: what the head waits for and each rank's group (empty: no groups).
        self.groups = GroupWatch(s.expected_groups())
        # Spot notices: ranks whose every alive node Ray is draining (from the GCS), and
        # each such rank's notice until its replacement has joined.
        self.draining: set[int] = set()
        self.interrupted: dict[int, InterruptRecord] = {}
        self._unread: dict[int, float] = {}  # rank -> until when its record is looked for
        self._next_read = 0.0
        self._last_notice: dict[int, float] = {}  # rank -> noticed_at of its last notice
        self.idle_drained: set[int] = set()  # ranks Ray's autoscaler drained as idle
        self._demand_seq: object = None  # the last autoscaler request published
        self._unavailable_seq = -1  # the last word of the watcher on groups it cannot start
        self._refused_seq: int | None = None  # the last such record not taken, said once
        self._status_seq = 0  # the last status record's sequence number
        # An `up` cluster: since when nothing has run or waited (for --autostop), why it
        # is busy ("" when it is not), and since when it serves.
        self.idle_since: float | None = None
        self.busy = ""
        self._busy_at = 0.0  # when it was last seen busy
        self.serving_since = time.time()

    # ------------------------------------------------------------------ Ray's GCS
    def connect(self) -> None:
        """A GCS client, not a driver: counting nodes needs no worker process, and
        a driver (``ray.init``) cost the head seconds of CPU -- and made the raylet
        prestart workers -- while the other nodes were still starting."""
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        self._gcs = GcsClient(address=self.address)
        self._connected = True
        url = self._gcs.internal_kv_get(b"dashboard", b"dashboard", timeout=GCS_TIMEOUT_S)
        self.dashboard_url = url.decode() if url and self.s.dashboard else ""

    def joined(self) -> set[int]:
        from ray.core.generated.gcs_pb2 import (  # type: ignore[attr-defined]
            GcsNodeInfo,
            NodeSnapshot,
        )

        alive = GcsNodeInfo.GcsNodeState.ALIVE
        ranks: dict[int, str | None] = {}
        draining: set[int] = set()
        active: set[int] = set()
        try:
            nodes = self._gcs.get_all_node_info(timeout=GCS_TIMEOUT_S).values()
        except Exception as exc:
            # A busy GCS is not a lost cluster: keep what we knew (a Ray head that
            # died is caught by check_health through its process).
            log(self.s, f"asking Ray's GCS for its nodes failed, will retry: {_why(exc)}")
            return self.ever_joined - self.lost
        idle_drained: set[int] = set()
        for info in nodes:
            labels = dict(info.labels)
            if labels.get("syndeo-cluster") == self.s.cluster_id and released_by_ray(info):
                with contextlib.suppress(KeyError, ValueError):
                    idle_drained.add(int(labels["syndeo-rank"]))
            if info.state == alive and labels.get("syndeo-cluster") == self.s.cluster_id:
                with contextlib.suppress(KeyError, ValueError):
                    rank = int(labels["syndeo-rank"])
                    ranks[rank] = labels.get("syndeo-group")
                    is_draining = info.state_snapshot.state == NodeSnapshot.State.DRAINING
                    (draining if is_draining else active).add(rank)
        # A rank with a replacement that joined is served, whatever its old node does.
        self.draining = draining - active
        if self.draining and self.s.autoscale:  # drained as idle by Ray's autoscaler: no notice
            self.draining -= autoscale.idle_drains(self.s, ranks)
        self.idle_drained = idle_drained - set(ranks)
        self.groups.observe(ranks, lambda msg: log(self.s, msg))
        return set(ranks)

    def demand_changed(self) -> bool:
        """True once per new request of the head's autoscaler (its sequence number)."""
        if not self.s.autoscale:
            return False
        seq = (autoscale.read_want(autoscale.want_path(self.s.scratch)) or {}).get("seq")
        if seq == self._demand_seq:
            return False
        self._demand_seq = seq
        return True

    def observe_idle(self, jobs_running: bool) -> None:
        """Since when nothing has run or waited: no submitted job, every node idle in
        Ray, no demand waiting for a node, no node on its way and (unless
        ``autostop_wait_for`` says otherwise) no connected driver."""
        wait_for = self.s.autostop_wait_for or "drivers"
        if wait_for == "none":  # autostop is a time limit from the start
            self.idle_since = self.serving_since
            return
        idle_s, why = 0.0, "a submitted job runs" if jobs_running else ""
        if not why and (n := autoscale.unjoined(self.s, self.groups.counts())):
            why = f"{n} node(s) asked for have not joined"
        if not why:
            try:
                idle_s, why = autoscale.cluster_activity(self._gcs, wait_for == "drivers")
            except Exception as exc:  # a busy GCS: not idle, for now
                why = "Ray's GCS did not answer"
                log(
                    self.s,
                    f"asking Ray's GCS how long its nodes have been idle failed: {_why(exc)}",
                )
        if why != self.busy and self.s.autostop_s is not None:
            log(self.s, f"busy: {why}" if why else "no job, driver or waiting demand")
        self.busy = why
        if why:
            self._busy_at = time.time()
        if idle_s <= 0:
            self.idle_since = None
        elif self.idle_since is None:
            # Idle from when the last thing that kept it busy went, not from when its
            # nodes last ran a task: a driver that waited an hour has just left.  Nor
            # from before the cluster served: a slow start is no idle time of the user's.
            self.idle_since = max(time.time() - idle_s, self._busy_at, self.serving_since)

    # ------------------------------------------------------------------ status
    def publish(self, phase: Phase, message: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_status < STATUS_EVERY_S:
            return
        self._last_status = now
        # Never lower than the last one, even across a restart of this process (from
        # the clock, in ms): the watcher takes no record older than one it has acted on.
        self._status_seq = max(self._status_seq + 1, time.time_ns() // 1_000_000)
        record = StatusRecord(
            cluster_id=self.s.cluster_id,
            attempt=self.s.attempt,
            seq=self._status_seq,
            phase=phase,
            nodes_expected=self.s.nodes,
            nodes_joined=sorted(self.ever_joined),
            message=message,
            progress=self.progress,
            dashboard_url=self.dashboard_url,
            updated_at=time.time(),
            groups=self.groups.counts(),
            nodes_lost=sorted(self.lost),
            interrupted=[self.interrupted[r] for r in sorted(self.interrupted)],
            demand=autoscale.demand(self.s, self.idle_since) if phase == Phase.SERVING else None,
        )
        signed = self._signed(record)
        self.store.call(lambda: self.rdv.publish_status(signed), None)

    def _signed(self, record: StatusRecord) -> StatusRecord:
        """The record signed whole with the launch key: the launcher's watcher acts on
        nothing else (unsigned without a key)."""
        if self.s.launch_key is None:
            return record
        try:
            return record.signed(self.s.launch_key)
        except ValueError:  # a progress value JSON cannot hold (NaN): that part goes
            return record.model_copy(update={"progress": {}}).signed(self.s.launch_key)

    def stop_requested(self) -> bool:
        """The launcher's stop flag; an unreachable store means "not asked to stop"."""
        return self.store.call(self.rdv.stop_requested, False)

    def control(self) -> Control:
        """Stop flag, jobs and cancellations (one list); unreachable: nothing asked."""
        return self.store.call(self.rdv.control, Control())

    def follow_unavailable(self, asked: Control) -> None:
        """Pass the watcher's newest word on groups it cannot start nodes of to Ray's
        autoscaler (syndeo/node/autoscale_provider.py), which then plans without them;
        read once per number, and only if the launch key signed it.  A record not taken
        moves nothing on: one planted with a high number must not hide the watcher's next
        (its own write removes every other record)."""
        seq = asked.unavailable
        if not self.s.autoscale or seq is None or seq <= self._unavailable_seq:
            return
        if seq == self._refused_seq:
            return
        record = self.store.call(partial(self.rdv.read_unavailable, seq, self.s.launch_key), None)
        if record is None:
            return  # the store did not answer: asked again at the next poll
        if isinstance(record, str):
            self._refused_seq = seq
            log(self.s, f"a record of unavailable groups not taken: {record}")
            return
        self._unavailable_seq = seq
        log(self.s, autoscale.take_unavailable(self.s, record, time.time()))

    def check_health(self) -> None:
        if not self.ray_proc.alive():
            raise NodeError(f"the Ray head exited unexpectedly: {self.ray_proc.log_tail()}")
        now = self.joined()
        # Nodes the autoscaler let go left on purpose: neither lost nor replaced.  Ray
        # drains them before the autoscaler's request names them: both count.
        let_go = autoscale.released(self.s) | self.idle_drained if self.s.autoscale else set()
        self.ever_joined -= let_go - now
        for rank in self.ever_joined - now - self.lost - set(self.interrupted):
            # Lost without being seen draining: Ray lets a drained node with nothing to
            # do go at once.  Its notice record, if it wrote one, says why (at most 1 read/s).
            self._unread.setdefault(rank, time.monotonic() + LOST_NOTICE_READ_S)
        self.lost = self.ever_joined - now  # a replaced rank is back in `now`
        self.lost_ever |= self.lost
        seen = time.time()
        for rank in now - self.ever_joined:
            self.first_seen[rank] = seen  # when the head first saw it (bring-up timeline)
        self.ever_joined |= now
        self._note_interruptions(now)

    def _note_interruptions(self, now: set[int]) -> None:
        """Ranks Ray drains (a node's spot notice) and the notice each node recorded."""
        for rank in sorted(self.draining - set(self.interrupted)):
            # Until the node's own record is read: what Ray says.
            self.interrupted[rank] = InterruptRecord(rank=rank, cloud="", noticed_at=time.time())
            self._unread[rank] = time.monotonic() + INTERRUPT_READ_FOR_S
            log(self.s, f"rank {rank} is draining (a spot notice)")
        if self._unread and time.monotonic() >= self._next_read:
            self._next_read = time.monotonic() + 1.0
            for rank, until in list(self._unread.items()):
                rec = self.store.call(partial(self.rdv.read_interrupted, rank), None)
                # Not the record of an earlier notice of this rank (an older node's).
                if rec is not None and rec.noticed_at > self._last_notice.get(rank, 0.0):
                    self.interrupted[rank] = rec
                    del self._unread[rank]
                elif time.monotonic() >= until:
                    del self._unread[rank]
        for rank in list(self.interrupted):
            if rank in now and rank not in self.draining:  # its replacement has joined
                self._last_notice[rank] = self.interrupted.pop(rank).noticed_at
                self._unread.pop(rank, None)

    # ------------------------------------------------------------------ phases
    def wait_for_nodes(self, timeout_s: float) -> None:
        self.publish(Phase.WAITING, force=True)
        stop_checks = _Every(STOP_EVERY_S)

        def all_joined() -> bool | None:
            before = set(self.ever_joined)
            self.check_health()
            # With groups: every group complete (ranks may come from grown nodes too).
            if self.groups.complete() if self.groups else len(self.ever_joined) >= self.s.nodes:
                return True
            # The store, unlike Ray's GCS, is not asked at the join-polling rate.
            if stop_checks.due() and self.rdv.stop_requested():
                raise NodeError("stop requested while waiting for nodes")
            self.publish(Phase.WAITING, force=self.ever_joined != before)
            return None

        # A GCS query is cheap: a joined node is seen within 0.2 s.
        if Poller(start_s=0.05, max_s=0.2).until(all_joined, time.monotonic() + timeout_s):
            return
        if self.groups and self.groups.at_least_min():
            # min_nodes met: start now; the others join the running cluster.
            log(self.s, f"starting with groups {self.groups.text()} (min_nodes met)")
            return
        raise JoinTimeout(self._missing_message(timeout_s))

    def _missing_message(self, timeout_s: float) -> str:
        expected = set(range(self.s.nodes))
        missing = sorted(expected - self.ever_joined)
        registered = {n.rank for n in self.rdv.list_nodes()}
        stuck = [r for r in missing if r in registered]
        workers = self.s.nodes - 1
        msg = (
            f"{len(self.ever_joined - {0})} of {workers} workers joined after {timeout_s:.0f} s: "
            f"missing ranks {', '.join(map(str, missing))}"
        )
        if stuck:
            msg += (
                f" (ranks {', '.join(map(str, stuck))} found the head but their Ray never joined)"
            )
        if self.groups:
            msg += f"; groups below min_nodes: {self.groups.short_of_min()}"
        return msg

    def finish(self, exit_code: int, message: str) -> None:
        # Best effort (the rendezvous may be what failed), but never silent: whatever
        # is swallowed here is said in the head's log.
        try:
            if self._connected:
                # The last status says who is there at the end (a replacement that
                # joined in the last seconds), not what the last health tick saw.
                with contextlib.suppress(Exception):
                    self.check_health()
            # Before the done record: a launcher that reads "done" stops reading the
            # status, so the status it can still read must already be the last one.
            self.publish(Phase.DONE if exit_code == 0 else Phase.FAILED, message, force=True)
            done = DoneRecord(
                cluster_id=self.s.cluster_id,
                attempt=self.s.attempt,
                exit_code=exit_code,
                message=message,
                finished_at=time.time(),
                lost_ranks=sorted(self.lost_ever),
            )
            if self.s.launch_key is not None:  # a launcher ends on nothing unsigned
                done = done.signed(self.s.launch_key)
            # Workers leave and the launcher reports on this record: wait out an outage.
            # Bring-up failures (no workload yet) still fail fast.
            _deliver(
                lambda: self.rdv.mark_done(done),
                "record that the cluster is done",
                DELIVER_DEADLINE_S if self.workload_started else 0.0,
            )
        except Exception as exc:
            log(self.s, f"could not record the end of the run ({message}): {_why(exc)}")


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def _workload_env(s: NodeSettings, address: str, token_path: Path) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    # The store's credentials and the launch key stay with the node (it does every
    # upload itself).
    env = child_env(s)
    env.pop("RAY_AUTH_TOKEN", None)
    env.update(
        RAY_ADDRESS=address,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token_path),
        SYNDEO_RESULT_PATH=str(s.scratch / "result.json"),
        SYNDEO_PROGRESS_FILE=str(s.scratch / "progress.json"),
        # Its output goes through a pipe: line by line, not in 8 KiB blocks, so it
        # shows live.
        PYTHONUNBUFFERED="1",
        # `python` in the user's command must be the interpreter that has Ray.
        PATH=bindir + os.pathsep + env.get("PATH", ""),
    )
    return env


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


class _Every:
    """True from :meth:`due` at most once per ``period_s`` (the first call is due)."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._next = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.period_s
        return True


def _serve(monitor: Monitor) -> tuple[int, str]:
    """An ``up`` cluster: serve until asked to stop, running submitted jobs meanwhile."""
    monitor.workload_started = True
    monitor.serving_since = time.time()
    monitor.publish(Phase.SERVING, force=True)
    agent = JobAgent(
        monitor.rdv,
        monitor.s.launch_key,
        monitor.dashboard_url,
        monitor.ray_proc.temp_dir,
        monitor.s.scratch,
        lambda msg: log(monitor.s, msg),
        wheelhouse.Installer(monitor.rdv, monitor.s, lambda msg: log(monitor.s, msg)),
        lambda: monitor.ever_joined - monitor.lost,
    )
    if agent.installer is not None:
        agent.installer.start()  # the jobs' packages, beside this loop
    health, control = _Every(HEALTH_EVERY_S), _Every(STOP_EVERY_S)
    why = "stopped on request"
    try:
        while True:
            if WARNED.is_set() and not monitor.warned:
                monitor.warned = True
                n = agent.signal_all(signal.SIGUSR1)
                log(monitor.s, f"time-limit warning: SIGUSR1 sent to {n} running job(s)")
            if control.due():
                asked = monitor.control()
                if asked.stop:
                    break
                agent.on_control(asked)
                monitor.follow_unavailable(asked)
            if health.due():
                monitor.check_health()
                agent.tick()
                monitor.observe_idle(bool(agent.running))
                if poweroff.due(monitor.s, monitor.idle_since, time.time()):
                    why = _stop_for_autostop(monitor)
                    break
            # A new request of the autoscaler goes out at once, not at the next status.
            monitor.publish(Phase.SERVING, force=monitor.demand_changed())
            time.sleep(TICK_S)
    finally:
        agent.stop_all()
    return 0, why


def _stop_for_autostop(monitor: Monitor) -> str:
    """Idle past autostop and its grace, so no watcher took the cluster down: the head
    asks every node to stop as `down` does, saying why (each VM then powers off)."""
    why = f"idle for autostop + grace ({poweroff.after_s(monitor.s):.0f} s), no watcher"
    log(monitor.s, f"{why}: stopping the cluster (autostop)")
    _deliver(lambda: monitor.rdv.request_stop(poweroff.AUTOSTOP_REASON), "the autostop request")
    return f"stopped: {why} (autostop)"


# How Ray's Job API hands a job's runtime_env to its driver: ray.init() reads this
# variable (ray._private.runtime_env.constants; tests/node/test_workdir.py checks the name
# against the installed Ray).
RAY_JOB_CONFIG_JSON_ENV_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def run_workload(
    s: NodeSettings, monitor: Monitor, address: str, token_path: Path
) -> tuple[int, str]:
    if not s.run.strip():
        return _serve(monitor)
    argv = shlex.split(s.run)
    env = _workload_env(s, address, token_path)
    cwd = s.workdir
    if s.workdir_digest is not None:
        # The launcher's files are not on this machine: its packed work dir is.  Ray
        # ships it to every node as the job's working dir (as Ray's Job API passes a
        # job's runtime_env to its driver); a runtime_env the program gives ray.init wins.
        cwd = workdir.for_run(monitor.rdv, s)
        env[RAY_JOB_CONFIG_JSON_ENV_VAR] = json.dumps({"runtime_env": {"working_dir": str(cwd)}})
        env["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    result_path, progress_path = Path(env["SYNDEO_RESULT_PATH"]), Path(env["SYNDEO_PROGRESS_FILE"])
    for stale in (result_path, progress_path):
        stale.unlink(missing_ok=True)
    monitor.publish(Phase.RUNNING, force=True)
    monitor.workload_started = True
    try:
        # Output through a pipe: echoed to this node's log as before, and streamed into
        # the rendezvous so a launcher anywhere shows it live and keeps it.
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except FileNotFoundError:
        raise WorkloadError(f"workload command not found: {argv[0]!r}", exit_code=127) from None
    except OSError as exc:
        raise WorkloadError(f"cannot run workload {argv[0]!r}: {exc.strerror}") from None
    stream = OutputStream(
        _output_sink(monitor.rdv, s), echo=sys.stdout.buffer, on_error=lambda msg: log(s, msg)
    )
    assert proc.stdout is not None
    pump = stream.pump(proc.stdout)
    try:
        _watch(proc, monitor, progress_path)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        pump.join(timeout=30)
        if not stream.close():
            log(s, "the workload's output did not all reach the rendezvous (kept in this log)")
    if monitor.stopped:
        return 130, "stopped on request"
    rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    rc, message = _upload_result(monitor.rdv, result_path, rc, s)
    if monitor.warned:
        message += " after the time-limit warning"
    return rc, message


def _output_sink(rdv: Rendezvous, s: NodeSettings) -> Callable[[int, bytes], None]:
    """Where the workload's output chunks go: into the rendezvous, sealed with the launch
    key; a node started without one keeps them in its own log alone (and says so)."""
    if rdv.launch_key is not None:
        return rdv.put_output
    log(s, f"the workload's output stays in this node's log: {NO_PAYLOAD_KEY}")
    return lambda _seq, _data: None


def _watch(proc: subprocess.Popen[bytes], monitor: Monitor, progress_path: Path) -> None:
    """Until the workload exits (or the launcher asks to stop: then it is ended)."""
    health, stop = _Every(HEALTH_EVERY_S), _Every(STOP_EVERY_S)
    warned, started = False, time.monotonic()
    while proc.poll() is None:
        if WARNED.is_set() and not warned and time.monotonic() - started >= WARN_AFTER_START_S:
            warned = monitor.warned = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGUSR1)
            log(monitor.s, "time-limit warning: SIGUSR1 sent to the workload (its checkpoint hook)")
        if health.due():
            monitor.check_health()
            with contextlib.suppress(OSError, ValueError):
                monitor.progress = json.loads(progress_path.read_text())
        if stop.due() and monitor.stop_requested():
            monitor.stopped = True
            _kill_group(proc)
            return
        monitor.publish(Phase.RUNNING)
        time.sleep(TICK_S)


def _upload_result(
    rdv: Rendezvous, path: Path, rc: int, s: NodeSettings | None = None
) -> tuple[int, str]:
    if not path.exists():
        return rc, f"workload exited with status {rc}"
    data = path.read_bytes()
    try:
        json.loads(data)
    except ValueError:
        where = _keep(path, s)
        return (rc or 1), (
            f"workload wrote a result that is not valid JSON (status {rc}); "
            f"kept on {socket.gethostname()} at {where}"
        )
    try:
        _deliver(lambda: rdv.put_result(data), "upload the result", DELIVER_DEADLINE_S)
    except (RendezvousError, PayloadRefused) as exc:
        where = _keep(path, s)
        return (rc or 1), f"result not uploaded ({exc}); kept on {socket.gethostname()} at {where}"
    return rc, f"workload exited with status {rc}"


def _keep(path: Path, s: NodeSettings | None) -> Path:
    """Move a result the rendezvous did not take out of scratch (teardown deletes scratch).

    Into the work dir, which every target binds and which outlives the node; where
    that fails the result stays where it is, and its path is still reported.
    """
    if s is None or s.workdir is None:
        return path
    dest = s.workdir / "syndeo-kept-results" / f"{s.cluster_id}-a{s.attempt}-r{s.rank}-{path.name}"
    try:
        dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # for the user alone
        shutil.move(path, dest)
        dest.chmod(0o600)
    except OSError as exc:
        log(s, f"could not move the result to {dest} ({exc.strerror}); it stays at {path}")
        return path
    return dest
