"""The watcher of an ``up`` cluster: what a ``deploy``'s launcher does while it follows
its run -- replace lost workers (``[recovery]``) -- for a cluster that serves until
``down``.

``up`` starts it as a process of its own session (it outlives the shell that ran
``up``; ``python -m syndeo.launcher.watch <id>``); ``down`` ends it before it stops
the cluster, so nothing the watcher starts outlives the cluster.  It reads the head's
status every 5 s (one read; every second while a cluster that follows demand is busy, or
was just sent a job) and ends by itself once the cluster has ended.  Each loss
and replacement is written to ``recovery.json`` in the cluster's dir, and said in
``watch.log`` beside it.

``launched.json`` is shared with ``grow``/``shrink`` run from other shells: every
read-modify-write of it holds :func:`cluster_lock`, and the watcher reads it afresh
before each replacement (a copy held across polls would undo a ``grow``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import FrameType

import psutil
from rich.console import Console
from rich.text import Text

from syndeo.core.errors import ConfigError, SyndeoError, TargetError
from syndeo.core.processes import ended
from syndeo.launcher import ledger
from syndeo.launcher.autoscale import Scaler
from syndeo.launcher.config import RecoverySettings, load_config
from syndeo.launcher.nodecreds import gcs_tokens
from syndeo.launcher.pyspawn import launcher_python
from syndeo.launcher.recovery import Recovery
from syndeo.launcher.spec import ClusterSpec, JobWatcher, Launched, ProcWatcher
from syndeo.launcher.state import (
    WATCH_POKE,
    cluster_dir,
    cluster_lock,
    home,
    load_launched,
    save_launched,
    store_env,
    update_launched,
    write_atomic,
)
from syndeo.launcher.statusgate import StatusGate
from syndeo.launcher.targets import Target, get_target
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import StatusRecord, open_rendezvous
from syndeo.rendezvous.base import ENDED

# One status read per poll (the store of a cluster that serves for days is asked as
# little as it can be): a lost node is reported by the head within about 10 s anyway.
WATCH_EVERY_S = 5.0
# While a cluster that follows demand is busy (its head's signed record says a job or a
# Ray task runs), one read a second: a node Ray asks for is started within about a
# second, not five.  An idle cluster is read at the 5 s pace only.
WATCH_BUSY_S = 1.0
# After a `submit` pokes it (WATCH_POKE), that pace for this long: the new job's demand
# comes before the head's status says the cluster is busy.
POKED_FOR_S = 30.0
# How often the watcher looks at the poke between polls (a local stat).
NAP_S = 0.25
# The target is asked less often: its poll may cost several requests (a VM target reads
# done, logs, head and status), and the head's status says "done" or "failed" first.
TARGET_EVERY_S = 30.0
# How long a head's "done"/"failed" waits for its target to agree before the watch ends
# (a requeued Slurm job shows as requeued only a paced query later).
ENDED_GRACE_S = 60.0
# Touched at each poll: how `status` knows that a watcher running elsewhere (a Slurm
# job of its own) is alive.
ALIVE = "watch.alive"
# How long ``down`` waits for a watcher to end (one in a terraform apply first lets
# Terraform save its state).
STOP_WAIT_S = 90.0
# The longest wait after unexpected errors in a row (see _Errors).
ERROR_WAIT_MAX_S = 300.0


def start(
    launched: Launched, spec: ClusterSpec, settings: RecoverySettings, target: Target
) -> None:
    """Start the watcher of ``launched`` (an ``up`` cluster) and record it there: a job
    of the target's own where the user asked for one, else a process beside us."""
    launched.spec = spec  # what a replacement needs
    launched.recovery = settings
    save_launched(launched)
    log = cluster_dir(launched.cluster_id) / "watch.log"
    env = {**os.environ, "SYNDEO_HOME": str(home())}
    # Isolated and in the cluster's own private dir: never a module of the directory
    # `up` ran in (a work dir the cluster's tasks may write).
    argv, cwd = launcher_python(
        "syndeo.launcher.watch", launched.cluster_id, cwd=cluster_dir(launched.cluster_id), env=env
    )
    job = target.start_watcher(launched, argv, env, log)
    if job is not None:
        launched.watcher = JobWatcher(job=job)
        save_launched(launched)
        return
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    launched.watcher = ProcWatcher(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time())
    save_launched(launched)


def stop(launched: Launched, target: Target) -> None:
    """End the watcher of ``launched``, if it runs (only ours: pid and start time, or
    the job the target started for it)."""
    entry = launched.watcher
    if entry is None:
        return
    if isinstance(entry, JobWatcher):
        target.stop_watcher(entry.job)
        return
    pid, ctime = entry.pid, entry.create_time
    with contextlib.suppress(psutil.NoSuchProcess):
        proc = psutil.Process(pid)
        if abs(proc.create_time() - ctime) >= 0.01:
            return  # a recycled pid: someone else's process
        proc.terminate()
        try:
            proc.wait(STOP_WAIT_S)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def alive(launched: Launched) -> bool:
    """Whether the watcher ``up`` started for ``launched`` runs: its pid with the same
    start time, or (a watcher job elsewhere) the mark it leaves at each poll."""
    entry = launched.watcher
    if isinstance(entry, JobWatcher):
        with contextlib.suppress(OSError):
            mark = (home() / "clusters" / launched.cluster_id / ALIVE).stat()
            return time.time() - mark.st_mtime < 3 * WATCH_EVERY_S
        return False
    with contextlib.suppress(psutil.Error):
        if entry is not None:
            proc = psutil.Process(entry.pid)
            return abs(proc.create_time() - entry.create_time) < 0.01 and not ended(proc)
    return False


def expected(launched: Launched) -> bool:
    """Whether ``launched`` should have a watcher: ``up`` started one (autostop, a group
    that follows demand, replacing lost nodes or renewing a token asked for it)."""
    return launched.watcher is not None and launched.spec is not None


def restart(cluster_id: str | None, ui: Ui) -> str:
    """Start the watcher of a running ``up`` cluster again after it died (a killed
    process, a crash, a watcher job that hit its time limit); the cluster's id.  Nothing
    is done if it runs."""
    launched = load_launched(cluster_id)
    if not expected(launched):
        raise ConfigError(
            f"cluster {launched.cluster_id} has no watcher to start: it was started without "
            "autostop, max_nodes or replacing lost nodes (or by `deploy --keep`)"
        )
    target = get_target(load_config(target=launched.target), echo=ui.echo)
    with cluster_lock(launched.cluster_id):
        launched = load_launched(launched.cluster_id)
        if alive(launched):
            ui.info(f"the watcher of cluster {launched.cluster_id} runs already")
            return launched.cluster_id
        stop(launched, target)  # a watcher job the queue still holds: never two watchers
        settings = launched.recovery or RecoverySettings()
        start(launched, launched.saved_spec(), settings, target)
    ui.info(f"the watcher of cluster {launched.cluster_id} runs again (log: watch.log)")
    return launched.cluster_id


class _LogUi(Ui):
    """Lines for watch.log, each with its time (no one reads them live), one line each
    however long (a log is grepped: never wrapped at a terminal's width)."""

    def __init__(self) -> None:
        super().__init__(Console(stderr=True, highlight=False, soft_wrap=True))

    def info(self, msg: str | Text) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        super().info(Text(f"{stamp} ") + (Text(msg) if isinstance(msg, str) else msg))


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class _Attempt:
    """What the watcher follows of the cluster's current attempt: its store scope, and
    the recovery and scaler acting on that attempt's status.  A requeued Slurm job runs
    again as the next attempt (the target's poll notes it in ``launched``): all three
    move there, and the old head's last status ("failed": Slurm ended it) does not end
    the watch."""

    def __init__(self, target: Target, launched: Launched, ui: Ui) -> None:
        self.target, self.ui = target, ui
        self.spec = launched.saved_spec()
        self.settings = launched.recovery or RecoverySettings()
        self.recovery = Recovery(target, self.spec, self.settings, ui)
        self.attempt = -1
        self.next_target_poll = 0.0  # at once: a target notes what it needs on its first poll
        self.ended_since: float | None = None
        self.last: StatusRecord | None = None  # the status of the latest poll
        self.poked_at = -POKED_FOR_S  # when a `submit` last poked the watcher
        self.follow(launched)

    def follow(self, launched: Launched) -> bool:
        """Move to the attempt ``launched`` names; True if that is a new one."""
        attempt = launched.attempt_or(self.spec.attempt)
        if attempt == self.attempt:
            return False
        first, self.attempt = self.attempt < 0, attempt
        spec = self.spec.model_copy(update={"attempt": attempt})
        self.rdv = open_rendezvous(launched.rendezvous, launched.cluster_id, attempt)
        # What the head signed for this attempt, never older than what was acted on.
        self.gate = StatusGate(spec.launch_key, launched.cluster_id, attempt, self.ui.info)
        events = self.recovery.events  # one history in recovery.json across attempts
        self.recovery = Recovery(self.target, spec, self.settings, self.ui)
        self.recovery.events = events
        key, rdv = spec.launch_key, self.rdv
        publish = None if key is None else lambda groups, seq: rdv.put_unavailable(groups, seq, key)
        self.scaler = Scaler(self.target, spec, launched.autostop_s, self.ui, publish)
        if not first:
            self.ui.info(f"cluster {launched.cluster_id} runs again as attempt {attempt}")
        return True

    def pace(self) -> float:
        """Seconds to the next poll: quicker while demand may come (see WATCH_BUSY_S)."""
        d = self.last.demand if self.last is not None else None
        busy = d is not None and d.idle_since is None
        busy = busy or time.monotonic() - self.poked_at < POKED_FOR_S
        return WATCH_BUSY_S if busy and self.scaler.bounds else WATCH_EVERY_S

    def step(self, launched: Launched) -> str | None:
        """One poll: "ended", "idle" (autostop is due) or None (go on watching)."""
        st = self.last = self.gate.take(self.rdv.read_status())
        said_ended = st is not None and st.phase in ENDED
        if st is not None and not said_ended:
            self.ended_since = None  # the head serves on: a later "done" waits afresh
        if said_ended or time.monotonic() >= self.next_target_poll:
            self.next_target_poll = time.monotonic() + TARGET_EVERY_S
            code = self.target.poll(launched)
            if self.follow(launched):
                self.ended_since = None
                return None  # the new attempt's status at the next poll
            if code is not None:
                return "ended"
        if said_ended:
            # The head said so; its target may say "requeued" a poll later (Slurm's
            # queue answers from a cache paced for the controller).
            self.ended_since = self.ended_since or time.monotonic()
            return "ended" if time.monotonic() - self.ended_since >= ENDED_GRACE_S else None
        self.recovery.observe(launched, st)
        return "idle" if self.scaler.observe(launched, st) else None


def watch(cluster_id: str, ui: Ui) -> int:
    launched = load_launched(cluster_id)
    os.environ.update(store_env(launched))
    target = get_target(load_config(target=launched.target), echo=ui.echo)
    current = _Attempt(target, launched, ui)
    renewer = _renewer(launched, current.spec, ui)
    errors = _Errors(ui)
    ui.info(f"watching cluster {cluster_id} (replace_lost={current.settings.replace_lost})")
    while True:
        try:
            outcome = _poll(cluster_id, current)
            if outcome == "idle":
                return _autostop(cluster_id, current.scaler, ui)
            if renewer is not None:
                renewer.tick()  # outside the lock: an STS call must not hold up a grow
        except Exception as exc:  # anything a poll did not expect: see _Errors
            outcome = None
            wait = errors.failed(exc, current.pace())
        else:
            errors.passed()
            wait = current.pace()
        if outcome == "ended":
            return 0  # (its dir may be gone: `down` removes it)
        (cluster_dir(cluster_id) / ALIVE).touch()
        if _nap(cluster_dir(cluster_id) / WATCH_POKE, wait):
            current.poked_at = time.monotonic()


def _poll(cluster_id: str, current: _Attempt) -> str | None:
    """One poll under the cluster's lock: "ended" (the cluster is gone or has ended),
    "idle" (autostop is due) or None."""
    ui = current.ui
    # Under the lock and from the file: a grow in another shell is not undone, and
    # what the target notes while polling (e.g. which Slurm node ran which rank,
    # when the head was last seen) is kept for the next poll and for `down`.
    with cluster_lock(cluster_id):
        try:
            launched = load_launched(cluster_id)
        except TargetError:
            if (home() / "clusters" / cluster_id / "launched.json").exists():
                raise  # there but unreadable (a bad write): an error to wait out
            ui.info(f"cluster {cluster_id} is gone (down): the watcher stops")
            return "ended"
        before, events_before = launched.model_dump_json(), json.dumps(current.recovery.events)
        asked_at = time.time()  # a node this poll starts was asked for from here on
        try:
            outcome = current.step(launched)
        except SyndeoError as exc:  # a store outage: the cluster may well run on
            ui.info(f"syndeo: could not read the cluster's records, will retry: {exc}")
            outcome = None
        if outcome == "ended":
            ui.info(f"cluster {cluster_id} has ended: the watcher stops")
            return "ended"
        note_nodes(current.target, launched, asked_at)
        if launched.model_dump_json() != before:
            save_launched(launched)
        if json.dumps(current.recovery.events) != events_before:
            events = cluster_dir(cluster_id) / "recovery.json"
            write_atomic(events, json.dumps(current.recovery.events, indent=2).encode())
    return outcome


def note_nodes(target: Target, launched: Launched, asked_at: float) -> None:
    """The nodes added now in the cluster's ledger, what ``status`` counts as cost."""
    if launched.spec is None or launched.spec.layout is None:
        return  # nothing is ever added to it
    try:
        added = {g.name: target.added(launched, g.name) for g in launched.spec.layout.groups}
    except TargetError:
        return  # a target that adds no node to a running cluster
    ledger.note(launched, added, asked_at, time.time())


class _Errors:
    """Unexpected errors in the watcher's polls (a bug, a library's surprise, a disk that
    refused a write): each is said in watch.log with a count, and the watcher carries on
    -- a cluster that serves for days must not lose its autoscaling, autostop and
    replacements to one bad answer.  Errors in a row wait longer, doubling up to
    ERROR_WAIT_MAX_S, so a lasting one does not fill the log or hammer a service."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.total = 0
        self.in_row = 0

    def failed(self, exc: Exception, pace: float) -> float:
        self.total += 1
        self.in_row += 1
        wait = min(ERROR_WAIT_MAX_S, pace * 2.0**self.in_row)
        what = "".join(traceback.format_exception_only(exc)).strip().replace("\n", " ")
        self.ui.info(
            f"unexpected error in a poll ({self.total} so far, {self.in_row} in a row): "
            f"{what}; the watcher carries on, next poll in {wait:.0f} s"
        )
        if self.in_row == 1:  # where it came from, once per run of errors
            self.ui.info("".join(traceback.format_exception(exc)).rstrip())
        return wait

    def passed(self) -> None:
        if self.in_row:
            self.ui.info(f"polls work again after {self.in_row} unexpected error(s) in a row")
        self.in_row = 0


def _nap(poke: Path, seconds: float) -> bool:
    """Sleep ``seconds``, or less if a `submit` pokes the watcher meanwhile (True)."""
    seen = _mtime(poke)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(NAP_S, left))
        if _mtime(poke) != seen:
            return True
    return False


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _renewer(launched: Launched, spec: ClusterSpec, ui: Ui) -> gcs_tokens.Renewer | None:
    """The nodes' GCS token (Slurm/ssh nodes of a gs:// rendezvous), renewed until `down`."""
    if not (launched.renew_gcs_token and spec.launch_key):
        return None
    return gcs_tokens.Renewer(
        launched.rendezvous,
        launched.cluster_id,
        spec.launch_key,
        ui.info,
        gcs_tokens.token_files(launched),
    )


def _autostop(cluster_id: str, scaler: Scaler, ui: Ui) -> int:
    """Take the idle cluster down with ``syndeo down``, as a user would (its own process:
    ``down`` ends the cluster's watcher first, and this is the watcher)."""
    ui.info(f"cluster {cluster_id} has been idle for {scaler.autostop_s:.0f} s: autostop")
    # So that `down` does not wait for this one.
    update_launched(cluster_id, lambda launched: setattr(launched, "watcher", None))
    # In $SYNDEO_HOME (0700): `down` removes the cluster's own dir.
    argv, cwd = launcher_python("syndeo", "down", "--cluster-id", cluster_id, cwd=home())
    rc = subprocess.run(argv, stdin=subprocess.DEVNULL, check=False, cwd=cwd).returncode
    ui.info(f"cluster {cluster_id} is down (autostop)" if rc == 0 else f"`down` exited {rc}")
    return rc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m syndeo.launcher.watch CLUSTER_ID", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # outlives the terminal of `up`
    ui = _LogUi()
    try:
        return watch(args[0], ui)
    except KeyboardInterrupt:
        ui.info("the watcher was asked to stop")
        return 0
    except SyndeoError as exc:
        ui.info(f"syndeo: the watcher stops: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
