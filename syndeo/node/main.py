"""``syndeo node``: the one command every target ends in.

Rank 0 starts the Ray head, publishes its address and a fresh auth token to the
rendezvous, waits (with a deadline) until every expected node has joined, runs the
workload and turns its exit status into the node's.  Other ranks wait for the
head record, join, and leave when the head says it is done.  Nothing here knows
which target started it: only :class:`~syndeo.core.nodeconfig.NodeSettings`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from syndeo import __version__
from syndeo.core import launchkey, tls
from syndeo.core.errors import NodeError, RendezvousDenied, SyndeoError
from syndeo.core.nodeconfig import NodeSettings, load_env_fd
from syndeo.core.poll import Poller
from syndeo.core.securedir import secure_dir, write_private
from syndeo.core.timeline import Timeline
from syndeo.node import poweroff, wheelhouse
from syndeo.node import tls as node_tls
from syndeo.node.leaving import Released, gcs_reachable, let_go, wait_until_done
from syndeo.node.preemption import Notice, Watcher, drain
from syndeo.node.raynode import RayProcess, client_server_port
from syndeo.node.workload import WARNED, Monitor, run_workload
from syndeo.rendezvous import (
    DoneRecord,
    HeadRecord,
    NodeRecord,
    Rendezvous,
    open_rendezvous,
)

RAY_START_TIMEOUT_S = 120.0
PR_SET_DUMPABLE = 4  # <linux/prctl.h>


class Terminated(BaseException):
    """SIGTERM/SIGINT arrived: unwind through every ``finally`` and tear down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    # Ignore repeats so that teardown itself is not interrupted.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Terminated(signum)


def _on_warning(_signum: int, _frame: FrameType | None) -> None:
    # SIGUSR1: the scheduler's warning before a time limit (or a preemption).  The head
    # passes it on to the workload and `submit` jobs (see workload.WARNED); a node has
    # nothing of its own to save, and the signal's default action would end it.
    WARNED.set()


def log(settings: NodeSettings, msg: str) -> None:
    print(f"[syndeo {settings.cluster_id} r{settings.rank}] {msg}", file=sys.stderr, flush=True)


def _write_private(path: Path, data: bytes) -> None:
    # O_NOFOLLOW|O_EXCL: never through a link another user planted (see securedir).
    write_private(path, data)


@contextlib.contextmanager
def _ray(proc: RayProcess, tl: Timeline) -> Iterator[RayProcess]:
    tl.mark("ray_start")
    proc.start()
    try:
        yield proc
    finally:
        # Already stopping: a TERM now (a launcher stopping every node at once) must
        # not cut this node's teardown short.
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            proc.stop()
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


@contextlib.contextmanager
def _spot_notices(
    s: NodeSettings, rdv: Rendezvous, address: str, token_path: Path, ray_proc: RayProcess
) -> Iterator[None]:
    """While this node is in the cluster: on a spot VM, watch the cloud's notice."""
    if s.spot_notices is None:
        yield
        return

    def on_notice(notice: Notice) -> None:
        node_id = drain(address, token_path, ray_proc.temp_dir, notice)
        log(s, f"Ray is draining this node ({node_id[:12]}): no new work lands here")

    watcher = Watcher(s, rdv, on_notice, lambda msg: log(s, msg)).start()
    try:
        yield
    finally:
        watcher.stop()


def _leave_timeline(s: NodeSettings, rdv: Rendezvous, tl: Timeline, ray_proc: RayProcess) -> None:
    # Diagnostics only: a store that cannot take it costs nothing else.
    tl.update(ray_proc.phases())
    with contextlib.suppress(Exception):
        rdv.put_timeline(s.rank, tl.as_dict())


def _publish_head(s: NodeSettings, rdv: Rendezvous, address: str, token: bytes) -> None:
    """The token (sealed), then the head record (signed with the launch key)."""
    ip, port = address.rsplit(":", 1)
    # Secret first: a worker that sees the head record can fetch the token at once.
    rdv.publish_token(token, s.launch_key)
    record = HeadRecord(
        cluster_id=s.cluster_id,
        attempt=s.attempt,
        ip=ip,
        gcs_port=int(port),
        ray_version=_ray_version(),
        syndeo_version=__version__,
        nonce=secrets.token_hex(8),
        created_at=time.time(),
        hostname=socket.gethostname(),
    )
    if s.launch_key is not None:
        # Proof for the workers that this record (and token) is their launch's.
        signature = launchkey.sign(s.launch_key, record.model_dump(mode="json"), token)
        record = record.model_copy(update={"signature": signature})
    rdv.publish_head(record)


def run_head(s: NodeSettings, rdv: Rendezvous, tl: Timeline) -> int:
    token = secrets.token_urlsafe(32)
    token_path = s.scratch / "token"
    _write_private(token_path, token.encode())
    rdv.cleanup_earlier_attempts()
    t0 = time.monotonic()
    with _ray(RayProcess(s, token_path, head_address=None), tl) as ray_proc:
        # Published as soon as the GCS takes connections: workers join while the
        # head's raylet and agents are still starting.
        address = ray_proc.wait_gcs_address(RAY_START_TIMEOUT_S)
        tl.mark("gcs_reachable")
        _publish_head(s, rdv, address, token.encode())
        tl.mark("published")
        log(s, f"head GCS up at {address} after {time.monotonic() - t0:.1f} s: published")
        monitor = Monitor(s, rdv, address, token_path, ray_proc)
        exit_code, message = 1, "head failed"
        try:
            full = ray_proc.wait_head_address(RAY_START_TIMEOUT_S)
            if full != address:
                raise NodeError(f"Ray head came up at {full}, not at the published {address}")
            monitor.connect()
            tl.mark("driver_connected")
            log(s, f"head up at {address} after {time.monotonic() - t0:.1f} s")
            # ray.init installs its own SIGTERM handler; ours must win so that a
            # scancel/Ctrl-C unwinds through teardown and records why.
            signal.signal(signal.SIGTERM, _on_signal)
            signal.signal(signal.SIGINT, _on_signal)
            monitor.wait_for_nodes(s.join_timeout)
            tl.mark("all_joined")
            tl.update({f"joined.{r}": t for r, t in monitor.first_seen.items()})
            _leave_timeline(s, rdv, tl, ray_proc)
            log(s, f"all {s.nodes} nodes joined after {time.monotonic() - t0:.1f} s")
            with _spot_notices(s, rdv, address, token_path, ray_proc):
                exit_code, message = run_workload(s, monitor, address, token_path)
        except Terminated as t:
            exit_code, message = 128 + t.signum, "terminated by signal"
            raise
        except SyndeoError as exc:
            exit_code, message = exc.exit_code, str(exc)
            raise
        finally:
            monitor.finish(exit_code, message)
        return exit_code


def _own_head(s: NodeSettings, rdv: Rendezvous) -> tuple[HeadRecord, bytes | None]:
    """The head record this launch's head signed (and its token), waited for."""
    if s.launch_key is None:
        log(s, "no SYNDEO_LAUNCH_KEY: any head record of this cluster id and attempt is trusted")

    def rejected(bad: HeadRecord) -> None:
        # Once per record, one line; the values are the planter's: repr keeps them one line.
        log(
            s,
            f"ignoring a head record with a bad signature ({bad.address!r}, host "
            f"{bad.hostname!r}): not published by this launch's head",
        )

    return rdv.wait_for_own_head(
        s.launch_key, s.join_timeout, not_before=s.not_before, on_rejected=rejected
    )


def run_worker(s: NodeSettings, rdv: Rendezvous, tl: Timeline) -> int:
    head, token = _own_head(s, rdv)
    tl.mark("head_seen")
    if token is None:
        raise NodeError(f"head of {s.cluster_id!r} published no auth token")
    token_path = s.scratch / "token"
    _write_private(token_path, token)
    installer = _pylibs(s, rdv)
    with _ray(RayProcess(s, token_path, head_address=head.address), tl) as ray_proc:
        try:
            if not ray_proc.wait_started(s.join_timeout, _over(rdv, head.address)):
                # A short run can end while this node is still starting: Ray would
                # only give up on the gone head after its own 30 s start-up timeout.
                log(s, "head is done before this node finished starting; leaving")
                return 0
            rdv.register_node(
                NodeRecord(
                    cluster_id=s.cluster_id,
                    rank=s.rank,
                    hostname=socket.gethostname(),
                    ip=s.node_ip or "",
                    pid=os.getpid(),
                    joined_at=time.time(),
                )
            )
            tl.mark("registered")
        finally:
            # Also when the run ends before this node has seen itself start (the head
            # counts a node once its raylet registers, a moment before that).
            _leave_timeline(s, rdv, tl, ray_proc)
        log(s, f"joined head {head.address}")
        if installer is not None:
            installer.start()
        # Joined: from here on Ray says whether the head is there, and the store is
        # read rarely (and may be down for minutes without taking this node out).
        with _spot_notices(s, rdv, head.address, token_path, ray_proc):
            done = wait_until_done(
                rdv,
                ray_proc.raylet_alive,
                lambda: gcs_reachable(head.address),
                lambda m: log(s, m),
                lambda d: d.verified(s.launch_key, s.cluster_id, s.attempt),
                lambda: let_go(head.address, token_path, ray_proc.temp_dir),
            )
        if done is not None:
            log(s, "head is done; leaving")
            return 0
        if not ray_proc.raylet_alive():
            raise NodeError(
                f"Ray on rank {s.rank} exited (head {head.address} gone or refused us): "
                f"{ray_proc.log_tail()}"
            )
        raise NodeError(
            f"head {head.address} is gone (its GCS refuses connections) and left no done record"
        )


def _pylibs(s: NodeSettings, rdv: Rendezvous) -> wheelhouse.Installer | None:
    """An `up` cluster's worker: the packages of the head's jobs, those wanted now
    installed before Ray starts (no task can land here first), later ones beside the
    wait loop.  None for a workload's cluster (its wheels come before Ray: deploy)."""
    if s.run.strip():
        return None
    installer = wheelhouse.Installer(rdv, s, lambda m: log(s, m))
    try:
        installer.sync()
    except SyndeoError as exc:  # the store has a bad moment: the thread tries again
        log(s, f"packages: could not sync with the wanted record: {exc}")
    return installer


def _over(rdv: Rendezvous, head_address: str) -> Callable[[], bool]:
    """A check, at most once a second, that the run is over: the head's GCS refuses
    connections (a TCP connect) and then the done record says so (one store read)."""
    next_check = time.monotonic() + 1.0

    def over() -> bool:
        nonlocal next_check
        if time.monotonic() < next_check:
            return False
        next_check = time.monotonic() + 1.0
        try:
            return not gcs_reachable(head_address, 1.0) and rdv.read_done() is not None
        except SyndeoError:  # the store is out: not a reason to stop starting
            return False

    return over


def _ray_version() -> str:
    from importlib.metadata import version

    return version("ray")


def _first_check(rdv: Rendezvous, s: NodeSettings) -> Rendezvous:
    """The store, reached once before anything else -- waiting out a refusal for up to
    the join timeout: on a machine that just booted, a cloud role binding (GCP, Azure:
    effective some time after the apply returns) or the instance credentials (EC2's
    metadata service at first boot) may not be there yet.  Any other failure (a
    missing bucket, a bad URI) is final at once."""
    refusals: list[RendezvousDenied] = []

    def reached() -> Rendezvous | None:
        # A new client after a refusal: an SDK resolves its credentials once, when made.
        client = (
            open_rendezvous(s.rendezvous, s.cluster_id, s.attempt, s.launch_key)
            if refusals
            else rdv
        )
        try:
            client.check()
            return client
        except RendezvousDenied as exc:
            if not refusals:
                log(s, f"{exc}: retrying for up to {s.join_timeout:.0f} s (new machine)")
            refusals.append(exc)
            return None

    found = Poller(start_s=1.0, max_s=10.0, factor=2.0).until(
        reached, time.monotonic() + s.join_timeout
    )
    if found is None:
        raise refusals[-1]
    return found


def _not_dumpable() -> str:
    """Keep this process's environment and memory from the cluster's own tasks; "" or why not.

    Ray's processes and every task run as the node's user, and a same-user process may
    read another's ``/proc/<pid>/environ`` (and, where Yama does not forbid it, its
    memory): this node's holds the launch key and the store's credentials, which
    :func:`raynode.child_env` already keeps out of what the tasks inherit.  A process
    that is not dumpable has its ``/proc/<pid>`` files owned by root and cannot be
    traced without CAP_SYS_PTRACE, which a task does not have.  The flag is not
    inherited across exec: Ray's processes, which hold no such secret, stay dumpable.
    """
    if not sys.platform.startswith("linux"):
        return "not Linux"
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return os.strerror(ctypes.get_errno())
    return ""


def _last_words(s: NodeSettings, rdv: Rendezvous, why: str, exit_code: int) -> None:
    """A failed node's log line in the store; a head that failed before recording its
    end also leaves a done record, signed: a launcher ends the cluster on nothing else
    (a head's log may be anyone's text), and need not wait for its deadline."""
    with contextlib.suppress(Exception):
        rdv.put_log(s.rank, f"{socket.gethostname()}: {why}")
        if s.is_head and s.launch_key is not None and rdv.read_done() is None:
            done = DoneRecord(
                cluster_id=s.cluster_id,
                attempt=s.attempt,
                exit_code=exit_code or 1,
                message=why,
                finished_at=time.time(),
            )
            rdv.mark_done(done.signed(s.launch_key))


def _released(s: NodeSettings, gone: Released) -> int:
    """Gone on purpose: a clean end (a Slurm job COMPLETED, not FAILED), and on the
    clouds that power off, a VM that powers off even with no watcher to remove it."""
    code = poweroff.released_status(s)
    log(s, f"{gone}: leaving (exit {code})")
    return code


def main(env: dict[str, str] | None = None) -> int:
    tl = Timeline()
    tl.mark("main")
    private = _not_dumpable()
    if env is None:
        # A containerised node's variables come on a pipe, not in the container's
        # environment (syndeo/launcher/command.py): read it before anything else runs.
        load_env_fd()
    settings = NodeSettings.from_env(env)
    if private:
        log(settings, f"this node's environment stays readable by its tasks: {private}")
    # Read like a backend's endpoint variable, not a node setting (syndeo/core/tls.py).
    use_tls = tls.enabled(os.environ if env is None else env)
    node_tls.check(settings, use_tls)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGUSR1, _on_warning)
    # Ours and private, or refused: the token and Ray's sockets go in here.  From the
    # base the launcher named: a start script's `mkdir -p` may have made the levels
    # above ours inside a directory another user planted, and only a check of every
    # level from the base down sees that.
    secure_dir(settings.scratch, base=settings.scratch_base)
    # With the launch key: it seals what the node stores (output, result, last words)
    # and opens what the launcher stored for it (the work dir, the wheels).
    rdv = open_rendezvous(
        settings.rendezvous, settings.cluster_id, settings.attempt, settings.launch_key
    )
    rdv = _first_check(rdv, settings)
    tl.mark("rendezvous_ok")
    try:
        if use_tls:
            # Into this process's environment: Ray's processes and the workload inherit
            # it (rendezvous.without_secrets keeps only the store's credentials back),
            # and this process's own Ray clients (the head's GCS client, a spot drain)
            # read it too.
            os.environ.update(node_tls.prepare(settings, rdv, lambda msg: log(settings, msg)))
            tl.mark("tls_ready")
        if settings.wheelhouse_digest is not None:
            # Before Ray starts: its workers and the workload inherit the path.
            os.environ.update(wheelhouse.install(rdv, settings))
            tl.mark("packages_ready")
        run = run_head if settings.is_head else run_worker
        code = run(settings, rdv, tl)
        return poweroff.exit_status(settings, rdv, code, lambda msg: log(settings, msg))
    except Terminated as t:
        log(settings, f"stopped by signal {t.signum}")
        return 128 + t.signum
    except Released as gone:
        return _released(settings, gone)
    except Exception as exc:
        # Never silent: the launcher may have no other way to see this node's log.
        why = str(exc) if isinstance(exc, SyndeoError) else f"{type(exc).__name__}: {exc}"
        _last_words(settings, rdv, why, exc.exit_code if isinstance(exc, SyndeoError) else 1)
        raise
    finally:
        # The token never outlives the node on disk (tokens do not expire), nor do its
        # TLS key and certificates.
        (settings.scratch / "token").unlink(missing_ok=True)
        node_tls.remove(settings.scratch)


__all__ = ["client_server_port", "main"]
