"""The verbs users call -- ``deploy``, ``up``, ``down`` -- identical for every target.

A target only makes machines appear (``launch``) and reports on them (``poll``,
``stop``); following progress, collecting results and teardown happen here, once,
through the rendezvous every target shares.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from rich.text import Text

from syndeo.core import tls
from syndeo.core.errors import (
    ConfigError,
    RendezvousError,
    TargetError,
    WorkloadError,
    tear_down_after,
)
from syndeo.launcher import autoscale, trusted, wheelhouse
from syndeo.launcher import tls as launcher_tls
from syndeo.launcher import watch as watcher
from syndeo.launcher.config import DeployConfig, RecoverySettings
from syndeo.launcher.job_client import newest_attempt, pack_workdir
from syndeo.launcher.nodecreds import gcs_tokens
from syndeo.launcher.preflight import check_workload
from syndeo.launcher.recovery import Recovery
from syndeo.launcher.spec import ClusterSpec, Launched, launched_key
from syndeo.launcher.state import (
    cluster_dir,
    forget,
    load_launched,
    save_launched,
    store_env,
    write_atomic,
)
from syndeo.launcher.statusgate import StatusGate
from syndeo.launcher.targets import Target, get_target, target_class
from syndeo.launcher.targets.base import new_cluster_id
from syndeo.launcher.ui import Ui
from syndeo.launcher.workload_log import WorkloadLog
from syndeo.rendezvous import (
    ClaimRecord,
    DoneRecord,
    PayloadRefused,
    Phase,
    Rendezvous,
    StatusRecord,
    open_rendezvous,
)
from syndeo.rendezvous.tolerant import Tolerant, retry_until

# Following polls the target and the rendezvous (for Slurm: scontrol, which every
# user of a shared controller pays for): 1 s after a change, backing off while
# nothing happens.
FOLLOW_EVERY_S = 1.0
FOLLOW_MAX_S = 5.0
# How often `down` looks whether the head has ended after its stop request.
DOWN_POLL_S = 1.0
# After the head reports done, how long its process may take to tear Ray down.
EXIT_GRACE_S = 60.0


class Teardown(StrEnum):
    """What became of a run's machines (said after the run, written to deploy.json)."""

    TORN_DOWN = "torn down"
    KEPT_UP = "kept up"  # --keep
    LEFT_UP = "left up"  # the teardown failed; the message says what may still exist


@dataclass
class Outcome:
    cluster_id: str
    exit_code: int
    message: str
    result_path: Path | None = None
    lost_ranks: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # The rendezvous attempt that finished: above 0 after the launcher restarted the
    # cluster for a lost head ([recovery] max_restarts) or Slurm requeued its job.
    attempt: int = 0
    teardown: Teardown = Teardown.TORN_DOWN


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal or SSH session) end a launcher like
    Ctrl-C does: through every ``finally``, so the cluster is torn down."""

    def _raise(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    old = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


@dataclass(frozen=True)
class Payload:
    """What a deploy stores in the rendezvous for its nodes, by digest: the work dir for
    the head (:func:`_packed`), the workload's wheels for every node (:func:`_wheels`)."""

    workdir: bytes | None
    wheels: bytes | None

    def store(self, rdv: Rendezvous, spec: ClusterSpec) -> None:
        if self.workdir is not None and spec.workdir_digest is not None:
            rdv.put_workdir(spec.workdir_digest, self.workdir)
        if self.wheels is not None and spec.wheelhouse_digest is not None:
            rdv.put_wheelhouse(spec.wheelhouse_digest, self.wheels)


def _packed(
    cfg: DeployConfig, target: Target, spec: ClusterSpec
) -> tuple[ClusterSpec, bytes | None]:
    """``spec`` with the digest of its work dir packed, and the archive, where the workload
    needs one: the user's own program (not the built-in benchmark, which is in the image)
    on a target whose machines do not share the launcher's files.  Packed as ``submit``
    packs (ignore rules, caps: one line each, before anything starts).  Packed or bound,
    a work dir that holds what the launcher runs or trusts is refused first."""
    if spec.workdir is not None:
        trusted.check_workdir(spec.workdir)
    if cfg.run is None or target.shares_workdir or spec.workdir is None:
        return spec, None
    archive = pack_workdir(spec.workdir, cfg.exclude)
    digest = hashlib.sha256(archive).hexdigest()
    return spec.model_copy(update={"workdir_digest": digest}), archive


def _wheels(cfg: DeployConfig, spec: ClusterSpec) -> tuple[ClusterSpec, bytes | None]:
    """``spec`` with the digest of the workload's wheels, and their archive, when it names
    packages beyond the image's (--requirements, or requirements.txt in the work dir)."""
    if cfg.run is None:
        return spec, None
    req = wheelhouse.requirements_file(cfg.requirements, spec.workdir)
    if req is None:
        return spec, None
    archive = wheelhouse.resolve(req, wheelhouse.node_python(spec.image))
    if archive is None:
        return spec, None  # the image has all of it
    digest = hashlib.sha256(archive).hexdigest()
    return spec.model_copy(update={"wheelhouse_digest": digest}), archive


def _prepare(cfg: DeployConfig, ui: Ui) -> tuple[Target, ClusterSpec, Rendezvous, Payload]:
    target = get_target(cfg, echo=ui.echo)
    if cfg.recovery.replace_lost and not target.can_replace():
        raise ConfigError(
            f"[recovery] replace_lost: the {cfg.target} target cannot replace a lost node "
            "yet; turn it off for this target"
        )
    cluster_id = cfg.cluster_id or new_cluster_id(cfg.target)
    uri = cfg.rendezvous or target.default_rendezvous()
    spec, archive = _packed(cfg, target, ClusterSpec.from_config(cfg, uri, cluster_id))
    if archive is not None:
        ui.info(f"syndeo: work dir {spec.workdir} packed for the head ({len(archive):,} bytes)")
    spec, wheels = _wheels(cfg, spec)
    if wheels is not None:
        ui.info(f"syndeo: wheels for every node resolved ({len(wheels):,} bytes)")
    payload = Payload(archive, wheels)
    target.check(spec)
    launcher_tls.check(spec)
    if (off := launcher_tls.notice(spec)) is not None and not ui.quiet:
        ui.console.print(Text(off), soft_wrap=True)  # one line, on a pipe too
    # With the launch key: the work dir and wheels go in sealed, output and result
    # come back opened (and refused if they are not this launch's).
    rdv = open_rendezvous(uri, cluster_id, launch_key=spec.launch_key)
    if target.creates_rendezvous(uri):
        # A bucket the launch creates, fresh and private: nothing to check or claim yet.
        return target, spec, rdv, payload
    rdv.check()
    # Atomic: of two launchers given the same id, exactly one gets past this line
    # (a check-then-publish let both launch and the loser's workers join the winner).
    rdv.claim(
        ClaimRecord(
            cluster_id=cluster_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            claimed_at=time.time(),
        )
    )
    if rdv.read_head() is not None:
        # A cluster started without a claim (by hand, or by an older syndeo).
        rdv.release_claim()
        raise RendezvousError(
            f"cluster id {cluster_id!r} is in use at {uri} (a head is published): pick another id "
            "or run `syndeo down` for it"
        )
    return target, spec, rdv, payload


def plan(cfg: DeployConfig) -> str:
    """The script a deploy would launch, without starting or writing anything."""
    target = get_target(cfg)
    cluster_id = cfg.cluster_id or new_cluster_id(cfg.target)
    uri = cfg.rendezvous or target.default_rendezvous()
    spec, _ = _packed(cfg, target, ClusterSpec.from_config(cfg, uri, cluster_id))
    return target.script(_wheels(cfg, spec)[0])


def _follow(
    target: Target,
    launched: Launched,
    rdv: Rendezvous,
    spec: ClusterSpec,
    ui: Ui,
    until_phase: Phase | None = None,
    output: WorkloadLog | None = None,
    recovery: Recovery | None = None,
) -> tuple[int | None, DoneRecord | None, dict[str, float], Rendezvous]:
    """Watch until the head ends (or reaches ``until_phase``).

    Returns (rc, done, timings, the rendezvous of the attempt that ended).
    """
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    done_seen: float | None = None
    # The target, not the store, says whether the cluster runs: while it does, a
    # failed read of the rendezvous is reported once and retried, never fatal.
    store = Tolerant(lambda msg: ui.info(f"syndeo: {msg}"))
    st: StatusRecord | None = None
    done: DoneRecord | None = None
    delay, seen = FOLLOW_EVERY_S, None
    heard = _HeadsWord(spec, rdv.attempt, store)
    while True:
        # The launcher's own attempt (a restart after a lost head) unless the target
        # knows better (Slurm: that base plus the job's requeues).
        attempt = launched.attempt_or(spec.attempt)
        if attempt != rdv.attempt:
            # The target restarted the cluster (a requeued Slurm job): follow the new
            # attempt's records; the old ones are stale by design.
            rdv = open_rendezvous(rdv.uri, rdv.cluster_id, attempt, rdv.launch_key)
            heard = _HeadsWord(spec, attempt, store)
            timings.pop("all_joined_s", None)
            done_seen, st, done = None, None, None
        st = heard.status(rdv, st)
        ui.status(spec.cluster_id, st)
        if recovery is not None:
            recovery.observe(launched, st, replace=done is None)
        fresh_output = output is not None and store.call(partial(output.poll, rdv), False)
        if st is not None:
            if "all_joined_s" not in timings and len(st.nodes_joined) >= spec.nodes:
                timings["all_joined_s"] = round(time.monotonic() - t0, 3)
            if until_phase is not None and st.phase == until_phase:
                return None, None, timings, rdv
        done = heard.done(rdv, done)
        if done is not None and done_seen is None:
            done_seen = time.monotonic()
            timings["workload_done_s"] = round(done_seen - t0, 3)
            target.hurry()  # the head ends next: look for it at the target's fastest pace
        rc = target.poll(launched)
        if rc is not None:
            timings["head_exit_s"] = round(time.monotonic() - t0, 3)
            return rc, _head_exited(launched, rdv, st, heard, recovery, timings), timings, rdv
        if done_seen is not None and time.monotonic() - done_seen > EXIT_GRACE_S:
            return done.exit_code if done else 1, done, timings, rdv
        now_seen = (attempt, _shape(st), done)
        live = _live(output, fresh_output, st, recovery)
        seen, delay = now_seen, _pace(now_seen != seen, live, delay)
        target.wait(launched, delay)


def _live(
    output: WorkloadLog | None, fresh: bool, st: StatusRecord | None, recovery: Recovery | None
) -> bool:
    """Whether the follower keeps its fastest pace: output is coming, or a replacement
    is under way (its steps -- notice, loss, join -- can be short-lived records)."""
    shown = output is not None and output.show is not None and (fresh or _running(st))
    return shown or (recovery is not None and recovery.pending)


def _shape(st: StatusRecord | None) -> tuple[object, ...]:
    """What of a status counts as a change for the follower's pace."""
    if st is None:
        return ()
    interrupted = tuple(n.rank for n in st.interrupted)
    return (st.phase, tuple(st.nodes_joined), tuple(st.nodes_lost), interrupted)


def _pace(changed: bool, live: bool, delay: float) -> float:
    """The follower's next wait: soon after a change, and while output is live (within a
    second or two); longer and longer while nothing moves."""
    if changed or live:
        return FOLLOW_EVERY_S
    return min(delay * 1.5, FOLLOW_MAX_S)


class _HeadsWord:
    """What the follower acts on (recovery, the run's end): the head's status records as
    the watcher takes them (signed, fresh, never older than the last: statusgate.py) and
    its done record only when the head signed it, for this cluster and attempt."""

    def __init__(self, spec: ClusterSpec, attempt: int, store: Tolerant) -> None:
        self.store, self.key, self.cluster_id, self.attempt = (
            store,
            spec.launch_key,
            spec.cluster_id,
            attempt,
        )
        self.gate = StatusGate(spec.launch_key, spec.cluster_id, attempt, store.log)
        self.refused: set[str | None] = set()

    def status(self, rdv: Rendezvous, last: StatusRecord | None) -> StatusRecord | None:
        return self.gate.take(self.store.call(rdv.read_status, None)) or last

    def signed_done(self, done: DoneRecord | None) -> DoneRecord | None:
        if done is None or done.verified(self.key, self.cluster_id, self.attempt):
            return done
        if done.signature not in self.refused:  # said once per record
            self.refused.add(done.signature)
            self.store.log("a done record not signed by this cluster's head: ignored")
        return None

    def done(self, rdv: Rendezvous, last: DoneRecord | None) -> DoneRecord | None:
        return self.signed_done(self.store.call(rdv.read_done, None)) or last


def _head_exited(
    launched: Launched,
    rdv: Rendezvous,
    st: StatusRecord | None,
    heard: _HeadsWord,
    recovery: Recovery | None,
    timings: dict[str, float],
) -> DoneRecord | None:
    """The head's process ended: its done record (waited for, through a store outage)."""
    if recovery is not None:
        # The head's last status (published before its done record): a
        # replacement that joined as the run ended is recorded as joined.
        recovery.observe(launched, heard.status(rdv, st), replace=False)

    def read() -> DoneRecord | None:
        return heard.signed_done(rdv.read_done())

    done = retry_until(read, EXIT_GRACE_S, heard.store.log, "read the done record")
    if done is not None:  # written between the follower's read and its poll: done by now
        timings.setdefault("workload_done_s", timings["head_exit_s"])
    return done


def _restart(
    target: Target,
    launched: Launched,
    spec: ClusterSpec,
    rdv: Rendezvous,
    rc: int | None,
    restarts: list[dict[str, Any]],
    t0: float,
    ui: Ui,
) -> tuple[ClusterSpec, Rendezvous]:
    """The head ended without a done record: stop what is left of this attempt and
    make the next one's spec (the caller launches it); records the restart.

    The whole cluster starts again, not just a head: the workers' Ray is bound to the
    dead head's GCS and cannot move to a new one.  The new attempt gets its own
    rendezvous scope, so nothing of the old one (its head address, token, status) is
    read by the new nodes; the new head removes the old records when it starts.
    """
    # Past every attempt the target has seen (a requeued Slurm job counts up on its
    # own): the new nodes can never meet records of an earlier attempt.
    attempt = max(rdv.attempt, launched.attempt_or(spec.attempt)) + 1
    event: dict[str, Any] = {
        "attempt": rdv.attempt,
        "head_exit": rc,
        "head_lost_s": round(time.monotonic() - t0, 3),
    }
    ui.info(
        f"syndeo: the head of attempt {rdv.attempt} ended without finishing (exit {rc}): "
        f"restarting the cluster as attempt {attempt}"
    )
    where = target.describe(launched)
    if where:
        ui.info(f"syndeo: attempt {rdv.attempt}: {where}")
    target.stop(launched)
    event["restarted_s"] = round(time.monotonic() - t0, 3)
    restarts.append(event)
    # A new launch time: workers accept only a head published after it.
    spec = spec.model_copy(update={"attempt": attempt, "not_before": time.time()})
    return spec, open_rendezvous(rdv.uri, rdv.cluster_id, attempt, rdv.launch_key)


def _running(st: StatusRecord | None) -> bool:
    return st is not None and st.phase == Phase.RUNNING


def _read_timelines(rdv: Rendezvous) -> dict[int, Any]:
    """Every node's bring-up timeline (diagnostics: a store that cannot give them costs
    the run nothing)."""
    try:
        return dict(rdv.read_timelines())
    except Exception:  # best effort by design
        return {}


# A bucket destroyed with the cluster is read before the destroy: the nodes leave
# their timelines on their way out, within seconds of the head's end.
TIMELINES_WAIT_S = 30.0


def _await_timelines(rdv: Rendezvous, nodes: int) -> dict[int, Any]:
    """Every node's timeline, waiting (bounded) for the nodes still leaving."""
    deadline = time.monotonic() + TIMELINES_WAIT_S
    found = _read_timelines(rdv)
    while len(found) < nodes and time.monotonic() < deadline:
        time.sleep(0.5)
        found = _read_timelines(rdv)
    return found


def _write_timeline(
    cfg: DeployConfig, cluster_id: str, nodes: dict[int, Any], launcher: dict[str, float]
) -> None:
    """The nodes' timelines and the launcher's marks, one file."""
    data = {"cluster_id": cluster_id, "launcher": launcher, "nodes": nodes}
    write_atomic(
        cfg.results_dir / cluster_id / "timeline.json",
        json.dumps(data, indent=2, sort_keys=True).encode(),
    )


def _collect(cfg: DeployConfig, rdv: Rendezvous, cluster_id: str) -> Path | None:
    data = rdv.get_result()
    if data is None:
        return None
    path = cfg.results_dir / cluster_id / "result.json"
    write_atomic(path, data)
    return path


def deploy(cfg: DeployConfig, ui: Ui | None = None, keep: bool = False) -> Outcome:
    """Bring a cluster up, run its workload to the end, collect the result, tear down.

    ``keep``: leave the machines up afterwards (``invoke down`` removes them).
    """
    ui = ui or Ui()
    with _signals_interrupt():
        return _deploy(cfg, ui, keep)


def _deploy(cfg: DeployConfig, ui: Ui, keep: bool) -> Outcome:
    check_workload(cfg)  # a bad setting costs no start-up (or queue wait) to find
    autoscale.check(cfg, "deploy", target_class(cfg.target))
    target, spec, rdv, payload = _prepare(cfg, ui)
    return _DeployRun(cfg, ui, keep, target, spec, rdv, payload).run()


class _DeployRun:
    """One ``deploy``, start to end: what it acquires, and where each thing it acquired is
    released (registered as it is acquired, released in reverse order whatever ends the
    run: success, failure, Ctrl-C, SIGTERM).

    Two scopes: the machines (the nodes, the TLS client files, the token renewal, the
    output log), released before the outcome is computed, since the nodes leave their
    timelines on their way out; and the cluster's records in the rendezvous (the claim
    :func:`_prepare` took), released last, once the outcome is written.  ``keep``: the
    machines and the records are never registered for release (``invoke down`` does it).
    """

    def __init__(
        self,
        cfg: DeployConfig,
        ui: Ui,
        keep: bool,
        target: Target,
        spec: ClusterSpec,
        rdv: Rendezvous,
        payload: Payload | None = None,
    ) -> None:
        self.cfg, self.ui, self.keep, self.target, self.spec, self.rdv = (
            cfg,
            ui,
            keep,
            target,
            spec,
            rdv,
        )
        self.payload = payload or Payload(None, None)  # stored for each attempt's nodes
        # A bucket the launch creates is destroyed with the cluster: nothing to clean after.
        self.owned = target.creates_rendezvous(spec.rendezvous)
        self.t0, self.wall0 = time.monotonic(), time.time()
        self.launched: Launched | None = None
        self.output = WorkloadLog(
            cfg.results_dir / spec.cluster_id / "workload.log",
            None if target.shows_head_output else ui.echo,
        )
        self.recovery = Recovery(target, spec, cfg.recovery, ui)
        self.restarts: list[dict[str, Any]] = []
        self.timings: dict[str, float] = {}
        self.rc: int | None = None
        self.done: DoneRecord | None = None
        self.result_path: Path | None = None
        self.nodes_timeline: dict[int, Any] = {}
        self.finished = False  # the workload's end was seen (not a launch cut short)
        self.teardown_failure: str | None = None  # the machines could not all be removed

    def run(self) -> Outcome:
        with self._records():
            with self.ui, contextlib.ExitStack() as machines:
                self._launch_and_follow(machines)
                self._collect()
            return self._outcome()

    # ------------------------------------------------------------------ the records
    @contextlib.contextmanager
    def _records(self) -> Iterator[None]:
        """The cluster's records (its claim first): removed when the run is over, so the
        id is free again -- not with ``--keep``, not when the bucket went with the
        cluster, not for a job we lost sight of (it still runs and uses them)."""
        try:
            yield
        except BaseException:
            unobserved = self.launched is not None and self.launched.unobserved
            if not (self.finished or self.keep or self.owned or unobserved):
                with contextlib.suppress(Exception):
                    self.rdv.cleanup(all_attempts=True)
            raise
        if not (self.keep or self.owned):
            self.rdv.cleanup(all_attempts=True)

    # ------------------------------------------------------------------ the machines
    def _launch_and_follow(self, machines: contextlib.ExitStack) -> None:
        spec = self.spec
        machines.callback(self.output.close)
        if not self.keep:
            # Last: its state (and TLS files) go once nothing of the cluster is up.
            machines.callback(self._forget)
        authority = launcher_tls.new_authority(spec)
        if authority is not None:
            launcher_tls.write_client(spec.cluster_id, authority)
            if not self.owned:
                # Before any node starts: they wait for it (a restart finds it too).
                launcher_tls.deliver(self.rdv, spec, authority)
        # Slurm/ssh nodes of a gs:// rendezvous got a 1-hour token: renewed while we follow.
        renewal = gcs_tokens.Renewal(
            spec.rendezvous, spec.cluster_id, spec.launch_key, self.ui.info
        )
        while True:
            t_attempt = time.monotonic()
            self._launch(machines, renewal)
            if self.owned:
                self.rdv.check()  # it exists only now
                if authority is not None:
                    launcher_tls.deliver(self.rdv, spec, authority)  # the nodes wait for it
            # Per attempt (nodes read their own attempt's records); they wait for it.
            self.payload.store(self.rdv, self.spec)
            launch_s = round(time.monotonic() - t_attempt, 3)
            assert self.launched is not None
            self.rc, self.done, self.timings, self.rdv = _follow(
                self.target,
                self.launched,
                self.rdv,
                self.spec,
                self.ui,
                output=self.output,
                recovery=self.recovery,
            )
            if self._ended():
                break
            self.spec, self.rdv = _restart(
                self.target,
                self.launched,
                self.spec,
                self.rdv,
                self.rc,
                self.restarts,
                self.t0,
                self.ui,
            )
        self._launch_timings(t_attempt, launch_s)
        self.finished = True

    def _launch(self, machines: contextlib.ExitStack, renewal: gcs_tokens.Renewal) -> None:
        first = self.launched is None
        self.launched = self.target.launch(self.spec)
        if first:
            # From here on the machines are ours to remove (the target removes what a
            # launch that fails part-way made), and the renewal ours to stop, before that.
            if not self.keep:
                machines.push(self._tear_down)
            machines.callback(renewal.stop, remove=not self.keep)
            machines.push(self._ask_head_to_stop)
        renewal.start(self.launched)
        if self.keep:
            save_launched(self.launched)

    def _ended(self) -> bool:
        """The run is over: its head recorded the end, or exited 0, or no restart is left."""
        return (
            self.done is not None
            or self.rc == 0
            or len(self.restarts) >= self.cfg.recovery.max_restarts
        )

    def _launch_timings(self, t_attempt: float, launch_s: float) -> None:
        timings = self.timings
        if self.restarts and "all_joined_s" in timings:
            # From the launch of the run: the restart's cost is joined_s - head_lost_s.
            self.restarts[-1]["joined_s"] = round(
                t_attempt - self.t0 + launch_s + timings["all_joined_s"], 3
            )
        # Following starts once launch returns (for VM targets: after apply).
        timings["launch_s"] = launch_s
        if "all_joined_s" in timings:
            timings["launch_to_joined_s"] = round(launch_s + timings["all_joined_s"], 3)

    def _collect(self) -> None:
        """Before the teardown: a VM target's destroy takes the bucket with it.  A store
        that fails now costs the result, never the teardown or the cleanup."""
        try:
            self.output.poll(self.rdv)  # the head delivers all of it before it records done
            self.result_path = _collect(self.cfg, self.rdv, self.spec.cluster_id)
        except (RendezvousError, PayloadRefused) as exc:
            self.ui.info(f"syndeo: the result could not be collected: {exc}")
        if self.owned:
            self.nodes_timeline = _await_timelines(self.rdv, self.spec.nodes)

    def _ask_head_to_stop(self, _type: object, exc: BaseException | None, _tb: object) -> bool:
        """Ctrl-C (or SIGTERM/SIGHUP): the head is asked to stop before its machines go."""
        if isinstance(exc, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                self.rdv.request_stop("interrupted")
        return False

    def _tear_down(self, _type: object, exc: BaseException | None, _tb: object) -> bool:
        """Remove the machines.  After a failure, a teardown that fails too is reported
        with it (core.errors.tear_down_after); after a run that ended, the user still
        needs its outcome: the failure is added to it, and the state stays for `down`."""
        assert self.launched is not None
        try:
            if exc is not None:
                tear_down_after(exc, partial(self.target.stop, self.launched))
            else:
                self.target.stop(self.launched)
        except TargetError as failure:
            self.teardown_failure = str(failure)
            if exc is not None:
                raise
        return False

    def _forget(self) -> None:
        if self.teardown_failure is None:  # else `invoke down --cluster-id` needs the state
            forget(self.spec.cluster_id)  # nothing of it is up any more (its TLS files too)

    # ------------------------------------------------------------------ the outcome
    def _outcome(self) -> Outcome:
        spec, done, rc = self.spec, self.done, self.rc
        self.timings["teardown_done_s"] = round(time.monotonic() - self.t0, 3)
        assert rc is not None
        if not self.owned:
            # Nodes leave their timelines on their way out: after the teardown, all are in.
            self.nodes_timeline = _read_timelines(self.rdv)
        self._write_timeline()
        message = (
            done.message
            if done is not None
            else f"the head ended before its workload finished (exit {rc})"
        )
        exit_code = done.exit_code if done is not None else (rc or 1)
        if exit_code != 0 and self.launched is not None:
            # The target knows what the rendezvous cannot: cancelled, time limit, logs.
            where = self.target.describe(self.launched)
            message = f"{message}; {where}" if where else message
        if self.teardown_failure is not None:
            message = f"{message}; and the teardown failed: {self.teardown_failure}"
            exit_code = exit_code or 1
        teardown = (
            Teardown.KEPT_UP
            if self.keep
            else Teardown.LEFT_UP
            if self.teardown_failure
            else Teardown.TORN_DOWN
        )
        outcome = Outcome(
            cluster_id=spec.cluster_id,
            exit_code=exit_code,
            message=message,
            result_path=self.result_path,
            lost_ranks=list(done.lost_ranks) if done else [],
            timings=self.timings,
            attempt=self.rdv.attempt,
            teardown=teardown,
        )
        _write_summary(self.cfg, spec, outcome, self._summary_extra())
        if self.keep:
            self.ui.info(
                f"cluster {spec.cluster_id} kept up: `syndeo down --cluster-id {spec.cluster_id}`"
            )
        # One shape for every failure, whatever its timing: a head that died before it
        # could record "done" and one that recorded it on its way down both come back as
        # an Outcome whose message carries what the target knows (raise_for_outcome).
        return outcome

    def _write_timeline(self) -> None:
        # The launcher's marks on the nodes' clock (wall time), for syndeo.core.timeline.
        marks = {"launch_start": 0.0, **{k.removesuffix("_s"): v for k, v in self.timings.items()}}
        marks.pop("launch_to_joined", None)
        if self.done is not None:
            # The head's clock: when it recorded done.
            marks["head_done"] = self.done.finished_at - self.wall0
        _write_timeline(
            self.cfg,
            self.spec.cluster_id,
            self.nodes_timeline,
            {k: round(self.wall0 + v, 3) for k, v in marks.items()},
        )

    def _summary_extra(self) -> dict[str, Any]:
        extra = self.target.summary(self.launched) if self.launched else {}
        if self.recovery.events:
            extra["recovery"] = self.recovery.events
        extra["attempt"] = self.rdv.attempt
        if self.restarts:
            extra["restarts"] = self.restarts
        return extra


def _write_summary(
    cfg: DeployConfig, spec: ClusterSpec, outcome: Outcome, extra: dict[str, Any]
) -> None:
    summary: dict[str, Any] = {
        "cluster_id": spec.cluster_id,
        "target": spec.target,
        "nodes": spec.nodes,
        "cpus_per_node": spec.cpus,
        "workload": spec.run,
        "exit_code": outcome.exit_code,
        "message": outcome.message,
        "lost_ranks": outcome.lost_ranks,
        "timings_s": outcome.timings,
        "result": str(outcome.result_path) if outcome.result_path else None,
    }
    if spec.image is not None:
        summary["image"] = {"sif": str(spec.image), "digest": spec.image_digest}
    summary["tls"] = spec.tls  # Ray's TLS on (a per-launch CA) or off
    summary.update(extra)  # e.g. the machines a VM target ran (cost comparison input)
    write_atomic(
        cfg.results_dir / spec.cluster_id / "deploy.json",
        json.dumps(summary, indent=2).encode(),
    )


# ---------------------------------------------------------------------- long-lived clusters
@dataclass
class UpInfo:
    cluster_id: str
    address: str
    token_path: Path
    dashboard_url: str
    nodes: int
    # With --tls: RAY_USE_TLS and the client's files (syndeo/launcher/tls.py); else empty.
    tls_env: dict[str, str] = field(default_factory=dict)


def up(cfg: DeployConfig, ui: Ui | None = None) -> UpInfo:
    """Start a cluster that serves until ``down``; returns how to connect to it."""
    ui = ui or Ui()
    with _signals_interrupt():
        return _up(cfg, ui)


def _up(cfg: DeployConfig, ui: Ui) -> UpInfo:
    # A long-lived cluster is where the dashboard earns its start-up cost.
    dashboard = cfg.dashboard if "dashboard" in cfg.model_fields_set else True
    cfg = cfg.model_copy(update={"run": None, "dashboard": dashboard})
    autoscale.check(cfg, "up", target_class(cfg.target))
    target, spec, rdv, _ = _prepare(cfg, ui)  # run None: nothing packed (submit packs)
    spec = spec.model_copy(update={"run": ""})
    # A cluster that serves for days is where lost workers must come back: replacing
    # them is on by default wherever the target can ([recovery] replace_lost = false: off).
    explicit = "replace_lost" in cfg.recovery.model_fields_set
    recovery = cfg.recovery.model_copy(
        update={"replace_lost": cfg.recovery.replace_lost if explicit else target.can_replace()}
    )
    return _UpRun(ui, target, spec, rdv).run(recovery, cfg.autostop_s)


class _UpRun:
    """One ``up``: until the cluster serves, whatever it acquired is released on any
    failure (registered as it is acquired); once it serves, the stack is handed over --
    the cluster lives on, and ``down`` (and the watcher) release it."""

    def __init__(self, ui: Ui, target: Target, spec: ClusterSpec, rdv: Rendezvous) -> None:
        self.ui, self.target, self.spec, self.rdv = ui, target, spec, rdv
        self.launched: Launched | None = None
        self.authority: tls.Authority | None = None
        self.teardown_failure: str | None = None

    def run(self, recovery: RecoverySettings, autostop_s: float | None) -> UpInfo:
        with contextlib.ExitStack() as cluster:
            cluster.push(self._forget_records)  # the claim, taken by _prepare
            cluster.callback(self._forget)
            launched = self._launch(cluster)
            renew = gcs_tokens.issued(self.spec.rendezvous, self.spec.cluster_id)
            scales = self.spec.layout is not None and any(
                g.autoscale for g in self.spec.layout.groups
            )
            if recovery.replace_lost or renew or scales or autostop_s is not None:
                launched.renew_gcs_token = renew
                launched.autostop_s = autostop_s
                watcher.start(launched, self.spec, recovery, self.target)
            info = self._info()
            cluster.pop_all()  # it serves: `down` releases it now
        return info

    def _launch(self, cluster: contextlib.ExitStack) -> Launched:
        """Launch and follow until the head serves."""
        spec, rdv = self.spec, self.rdv
        owned = self.target.creates_rendezvous(spec.rendezvous)
        authority = self.authority = launcher_tls.new_authority(spec)
        # Until the watcher takes over (a Slurm job may queue for longer than a token lives).
        renewal = gcs_tokens.Renewal(
            spec.rendezvous, spec.cluster_id, spec.launch_key, self.ui.info
        )
        with self.ui:
            if authority is not None and not owned:
                launcher_tls.deliver(rdv, spec, authority)  # before any node starts
            launched = self.launched = self.target.launch(spec, detach=True)
            cluster.push(self._tear_down)
            # The spec, its launch key with it (0600): what signs the jobs submitted later
            # and what a grow or a replacement needs.
            launched.spec = spec
            renewal.start(launched)
            cluster.callback(renewal.stop)
            save_launched(launched)
            if authority is not None and owned:
                rdv.check()  # the bucket exists only now; the nodes wait for the bundle
                launcher_tls.deliver(rdv, spec, authority)
            rc, done, _, self.rdv = _follow(
                self.target, launched, rdv, spec, self.ui, until_phase=Phase.SERVING
            )
        renewal.stop(remove=False)  # the watcher renews from here on
        if rc is not None:
            why = done.message if done else "its head exited"
            raise TargetError(
                f"cluster {spec.cluster_id} did not come up: {why}; "
                f"{self.target.describe(launched)}"
            )
        return launched

    def _info(self) -> UpInfo:
        """How to reach the cluster: only the head this launch started (its record signed
        with our launch key) -- its address and token are where the user's work goes."""
        spec, rdv = self.spec, self.rdv
        found, st = rdv.check_head(spec.launch_key), rdv.read_status()
        head, token = found.head, found.token
        if head is None or token is None:
            why = "a head record with a bad signature" if found.rejected else "no head record"
            raise TargetError(
                f"cluster {spec.cluster_id} reported serving but the rendezvous holds {why}: "
                "not connecting to it; the cluster was stopped"
            )
        token_path = cluster_dir(spec.cluster_id) / "token"
        write_atomic(token_path, token)
        tls_env: dict[str, str] = {}
        if self.authority is not None:
            # Named in the client's certificate: a driver serves its workers at the address
            # of the node it attaches to.
            ips = [head.ip, *(n.ip for n in rdv.list_nodes() if n.ip)]
            tls_env = launcher_tls.write_client(spec.cluster_id, self.authority, ips)
        dashboard_url = st.dashboard_url if st else ""
        return UpInfo(spec.cluster_id, head.address, token_path, dashboard_url, spec.nodes, tls_env)

    def _tear_down(self, _type: object, exc: BaseException | None, _tb: object) -> bool:
        assert self.launched is not None and exc is not None  # released on failures only
        try:
            tear_down_after(exc, partial(self.target.stop, self.launched))
        except BaseException:
            self.teardown_failure = "failed"
            raise
        return False

    def _forget(self) -> None:
        if self.teardown_failure is None:  # else `invoke down --cluster-id` needs the state
            forget(self.spec.cluster_id)

    def _forget_records(self, _type: object, exc: BaseException | None, _tb: object) -> bool:
        """The id is free again -- unless we lost sight of a job that still uses them."""
        if not (self.launched is not None and self.launched.unobserved):
            with contextlib.suppress(Exception):
                self.rdv.cleanup(all_attempts=True)
        return False


def down(cluster_id: str | None, ui: Ui | None = None, timeout_s: float = 60.0) -> str:
    """Stop a cluster started by ``up``: ask its head through the rendezvous, then make sure.

    Needs nothing but the state ``up`` saved (and the cloud's credentials in the
    environment): it works from a new shell.
    """
    ui = ui or Ui()
    launched = load_launched(cluster_id)
    os.environ.update(store_env(launched))
    from syndeo.launcher.config import load_config

    target = get_target(load_config(target=launched.target))
    # Its watcher first: a replacement started after this point would outlive the
    # cluster.  Then the state as the watcher left it (the nodes it replaced).
    watcher.stop(launched, target)
    launched = load_launched(launched.cluster_id)
    # The stop request goes to the head that runs now: after a requeue, a later attempt.
    attempt, key = launched.attempt_or(0), launched_key(launched)
    rdv = open_rendezvous(launched.rendezvous, launched.cluster_id, attempt)
    with contextlib.suppress(RendezvousError):  # a store that is gone: stop all the same
        rdv = newest_attempt(launched, attempt, key)
    try:
        # After a teardown that failed, the run is over and its stop was asked for: what
        # is left is the teardown, not a head to wait for.
        if not launched.destroy_failed:
            rdv.request_stop("down")
            target.hurry()
            if not _head_ended(target, launched, timeout_s):
                ui.info(
                    f"cluster {launched.cluster_id}: no word from its head that it stopped "
                    f"within {timeout_s:.0f} s: stopping its machines all the same"
                )
    except RendezvousError:
        pass  # its store is gone or never came up (a launch killed early): stop all the same
    target.stop(launched)
    if not launched.owns_rendezvous:
        rdv.cleanup(all_attempts=True)  # (a bucket made with the cluster went with it)
    for path in gcs_tokens.token_files(launched):  # the nodes' token in a Slurm job dir
        path.unlink(missing_ok=True)
    forget(launched.cluster_id)
    (cluster_dir(launched.cluster_id) / "token").unlink(missing_ok=True)
    return launched.cluster_id


def _head_ended(target: Target, launched: Launched, timeout_s: float) -> bool:
    """Whether the target saw the head end within ``timeout_s`` (each poll may ask the
    target: Slurm at most every 2 s, queue.py; a cloud reads the head's signed done)."""
    deadline = time.monotonic() + timeout_s
    while target.poll(launched) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(DOWN_POLL_S)
    return True


def raise_for_outcome(outcome: Outcome) -> None:
    if outcome.exit_code != 0:
        raise WorkloadError(
            f"cluster {outcome.cluster_id}: {outcome.message}", exit_code=outcome.exit_code
        )
