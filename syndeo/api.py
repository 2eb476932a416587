"""Syndeo from Python: start a cluster, run programs on it, stop it.

    import syndeo

    with syndeo.up(target="local", nodes=2) as cluster:
        job = cluster.submit("python train.py", workdir=".", requirements="requirements.txt")
        print(job.result().output)

    outcome = syndeo.deploy("python train.py", target="slurm", nodes=4)
    cluster = syndeo.Cluster.attach("local-1a2b3c4d")  # one started elsewhere

The ``syndeo`` command line is built on these functions.  A mistake of the caller's (a bad
setting, no such cluster, a job that failed) raises a ``SyndeoError`` whose message is the
one line the command line prints.  Settings are the config file's keys and the command
line's options, by their config names (``cpus_per_node=4``, ``join_timeout_s=300``,
``rendezvous="s3://b/p"``).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from syndeo.core.errors import ConfigError, TargetError, WorkloadError

if TYPE_CHECKING:
    from syndeo.launcher import job_client
    from syndeo.launcher.deploy import Outcome, UpInfo
    from syndeo.launcher.status import ClusterStatus
    from syndeo.launcher.ui import Ui
    from syndeo.rendezvous import JobState as JobRecord

# How often a waiting job is read from the rendezvous (as `logs --follow` does).
POLL_S = 0.5


class JobState(StrEnum):
    """Where a job is; the last four are final.  Its value is the word the command line
    shows (``"running"``)."""

    PENDING = "pending"
    """Submitted; the head has not taken it yet."""
    INSTALLING = "installing"
    """Its packages are being installed on every node."""
    RUNNING = "running"
    """Its command runs on the head."""
    SUCCEEDED = "succeeded"
    """Its command exited 0."""
    FAILED = "failed"
    """Its command exited non-zero, or its packages could not be installed."""
    CANCELLED = "cancelled"
    """Stopped by ``Job.cancel()`` or ``syndeo cancel``."""
    REJECTED = "rejected"
    """The head refused it (its upload or its request was not valid)."""

    @property
    def done(self) -> bool:
        """Whether it has ended (one of the last four)."""
        return self not in (JobState.PENDING, JobState.INSTALLING, JobState.RUNNING)


@dataclass(frozen=True)
class JobResult:
    """How a job that ended ended: its state, exit code, the head's word, its output."""

    job_id: str
    """The job's id (as ``syndeo jobs`` lists it)."""
    state: JobState
    """Its final state."""
    exit_code: int | None
    """Its command's exit code (None when it never ran)."""
    message: str
    """What the head said of its end (empty when nothing)."""
    output: str
    """Its output (stdout and stderr together), as text."""


def _ui(ui: Ui | None, verbose: bool) -> Ui:
    from syndeo.launcher.ui import Ui

    return ui or Ui(quiet=not verbose)


def _config(config: str | Path | None, settings: Mapping[str, Any]) -> Any:
    from syndeo.launcher.config import load_config

    given = {k: v for k, v in settings.items() if v is not None}
    return load_config(Path(config) if config else None, **given)


class Job:
    """A job submitted to a cluster: a command run in its work dir on the head."""

    def __init__(self, cluster: Cluster, job_id: str) -> None:
        self.cluster = cluster
        self.id = job_id

    def __repr__(self) -> str:
        return f"Job({self.id!r}, cluster={self.cluster.id!r})"

    def _record(self) -> JobRecord | None:
        from syndeo.launcher import job_client

        return job_client.job_state(self.id, self.cluster.client())

    @property
    def state(self) -> JobState:
        """Its state now (PENDING until the head took it)."""
        return _state(self._record())

    def stream(self, emit: Callable[[bytes], None], follow: bool = False) -> JobRecord | None:
        """Hand its output to ``emit`` from the start (control sequences removed); with
        ``follow`` until it ends.  Its state record as the head last wrote it."""
        from syndeo.launcher import job_client

        return job_client.logs(self.id, emit, follow=follow, cluster=self.cluster.client())

    def logs(self) -> str:
        """Its output so far, as text."""
        chunks: list[bytes] = []
        self.stream(chunks.append)
        return b"".join(chunks).decode(errors="replace")

    def wait(self, timeout: float | None = None) -> JobState:
        """Wait until it ends (a TimeoutError after ``timeout`` seconds); its final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (state := self.state).done:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} still {state.value} after {timeout} s")
            time.sleep(POLL_S)
        return state

    def result(self, timeout: float | None = None) -> JobResult:
        """Wait until it ends; how it ended.  A job that did not succeed raises a
        WorkloadError (its exit status as the command line's: the job's own, 130 when
        cancelled, 2 when rejected)."""
        self.wait(timeout)
        record = self._record()
        assert record is not None  # a job that ended has its record
        state = _state(record)
        done = JobResult(self.id, state, record.exit_code, record.message, self.logs())
        if state is not JobState.SUCCEEDED:
            raise WorkloadError(ended(record), exit_code=exit_status(record))
        return done

    def cancel(self) -> JobState:
        """Ask the head to stop it (nothing when it has ended already); the state it was in."""
        from syndeo.launcher import job_client

        return _state(job_client.cancel(self.id, self.cluster.id))

    def fetch(self, dest: str | Path | None = None) -> list[Path]:
        """Download the files it left in its outputs/ directory (default
        results/CLUSTER/jobs/JOB); their paths."""
        from syndeo.launcher import job_client

        where = Path(dest) if dest else Path("results") / self.cluster.id / "jobs" / self.id
        return job_client.fetch(self.id, where, cluster_id=self.cluster.id)


def _state(record: JobRecord | None) -> JobState:
    """The state a record says (the store's words: one this version does not know is a
    one-line error, not a traceback)."""
    if record is None:
        return JobState.PENDING
    try:
        return JobState(record.state)
    except ValueError:
        raise TargetError(f"job {record.job_id} has an unknown state {record.state!r}") from None


def ended(record: JobRecord) -> str:
    """How a job ended, in the one line the command line says too."""
    detail = f" (exit {record.exit_code})" if record.exit_code is not None else ""
    why = f": {record.message}" if record.message else ""
    return f"job {record.job_id} {record.state}{detail}{why}"


def exit_status(record: JobRecord | None) -> int:
    """The command line's exit status for a job that ended so: 0 when it succeeded, its
    exit code when it failed, 130 when cancelled, 2 when rejected, 1 when unknown."""
    codes = {"succeeded": 0, "cancelled": 130, "rejected": 2}
    if record is None:
        return 1
    return codes.get(record.state, record.exit_code or 1)


class Cluster:
    """A cluster started with [`up`][syndeo.api.up] (here or elsewhere): submit jobs to
    it, grow or shrink it, read its status, stop it.

    As a context manager, a cluster that ``up`` started stops when the block ends
    (``with syndeo.up(...) as cluster:``).  One reached with
    [`attach`][syndeo.api.Cluster.attach] belongs to whoever started it: leaving a
    ``with`` block leaves it running (stop it with ``cluster.down()``)."""

    def __init__(self, cluster_id: str, info: UpInfo | None = None, *, owned: bool = False) -> None:
        self.id = cluster_id
        # How to reach its Ray (address, token, dashboard) when it was started here.
        self.info = info
        # Started by this process's `up`: leaving a `with` block stops it.  An attached
        # cluster is someone else's (a shell's `syndeo up`, another program's), so a
        # `with` used only to scope its use must not take it down under them.
        self.owned = owned
        self._client: job_client.Cluster | None = None

    def __repr__(self) -> str:
        return f"Cluster({self.id!r})"

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.owned:
            self.down()

    @classmethod
    def attach(cls, cluster_id: str | None = None) -> Cluster:
        """The cluster with this id that ``up`` started for this user on this machine (with
        no id: the only one up); a SyndeoError if there is none.  Leaving a ``with`` block
        does not stop it; ``down()`` does."""
        from syndeo.launcher.state import load_launched

        return cls(load_launched(cluster_id).cluster_id)

    def client(self) -> job_client.Cluster:
        """Its rendezvous and launch key, as the job verbs reach it (opened once)."""
        from syndeo.launcher import job_client

        if self._client is None:
            self._client = job_client.open_cluster(self.id)
        return self._client

    def submit(
        self,
        command: str | Sequence[str],
        workdir: str | Path = ".",
        requirements: str | Path | None = None,
        env: Mapping[str, str] | Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        ui: Ui | None = None,
    ) -> Job:
        """Run ``command`` (a shell-like line or an argv) on the cluster: ``workdir`` is
        uploaded (less ``exclude``, .gitignore-style) and the command runs in it;
        ``requirements`` (default: requirements.txt in ``workdir``, if any) are
        installed for it on every node; ``env`` is its environment beyond the node's (a
        mapping, or NAME=VALUE texts)."""
        from syndeo.launcher import job_client

        argv = shlex.split(command) if isinstance(command, str) else list(command)
        given = env or {}
        pairs = [f"{k}={v}" for k, v in given.items()] if isinstance(given, Mapping) else given
        say = _ui(ui, False).info
        _, spec = job_client.submit(
            argv,
            cluster_id=self.id,
            workdir=Path(workdir),
            env=list(pairs),
            excludes=list(exclude),
            requirements=Path(requirements) if requirements else None,
            say=say,
        )
        if spec.wheelhouse_digest is not None:
            say(f"wheels for the job resolved (sha256 {spec.wheelhouse_digest[:12]})")
        return Job(self, spec.job_id)

    def job(self, job_id: str) -> Job:
        """A job of this cluster by its id."""
        return Job(self, job_id)

    def jobs(self) -> list[tuple[Job, JobRecord]]:
        """Its jobs with their state records, oldest first."""
        from syndeo.launcher import job_client

        _, found = job_client.list_jobs(self.id)
        return [(Job(self, spec.job_id), state) for spec, state in found]

    def grow(
        self,
        group: str,
        nodes: int = 1,
        wait_s: float | None = None,
        hosts: Sequence[str] | None = None,
        ui: Ui | None = None,
    ) -> None:
        """Add ``nodes`` nodes of node group ``group``; with ``wait_s``, wait up to that
        long until they joined.  ``hosts``: the ssh target's machines, one per node."""
        from syndeo.launcher.grow import grow

        grow(self.id, group, nodes, wait_s, _ui(ui, False), hosts=list(hosts) if hosts else None)

    def shrink(self, group: str, nodes: int | None = None, ui: Ui | None = None) -> list[str]:
        """Stop added nodes of ``group`` (never the head) down to ``nodes`` (default: all
        of them); the names of those stopped."""
        from syndeo.launcher.grow import shrink

        return shrink(self.id, group, nodes, _ui(ui, False))

    def status(self) -> ClusterStatus:
        """Its nodes per group, state, jobs running, idle time, autostop and cost."""
        from syndeo.launcher.status import clusters

        return clusters(self.id)[0]

    def down(self, ui: Ui | None = None) -> None:
        """Stop it and remove what it made (machines, its rendezvous records, its state)."""
        from syndeo.launcher.deploy import down

        down(self.id, _ui(ui, False))
        self._client = None


def up(
    target: str | None = None,
    nodes: int | None = None,
    *,
    config: str | Path | None = None,
    verbose: bool = False,
    ui: Ui | None = None,
    **settings: Any,
) -> Cluster:
    """Start a cluster that serves until it is stopped (``cluster.down()``, leaving a
    ``with`` block, or ``syndeo down``).  ``target``, ``nodes`` and ``settings`` override
    the ``config`` file's; ``verbose``: say how the start goes on stderr."""
    from syndeo.launcher.deploy import up as start

    cfg = _config(config, {"target": target, "nodes": nodes, **settings})
    info = start(cfg, _ui(ui, verbose))
    return Cluster(info.cluster_id, info, owned=True)


def deploy(
    run: str | None = None,
    target: str | None = None,
    nodes: int | None = None,
    *,
    config: str | Path | None = None,
    keep: bool = False,
    check: bool = True,
    verbose: bool = False,
    ui: Ui | None = None,
    **settings: Any,
) -> Outcome:
    """Start a cluster, run ``run`` (a command line in the work dir; default: the
    benchmark) on it, collect its results, stop it (``keep``: leave it up).  How the run
    went; with ``check``, a run that failed raises a WorkloadError instead."""
    from syndeo.launcher.deploy import deploy as run_once
    from syndeo.launcher.deploy import raise_for_outcome

    if "dry_run" in settings:
        raise ConfigError("dry_run: use syndeo.plan(...) to see what deploy would start")
    cfg = _config(config, {"run": run, "target": target, "nodes": nodes, **settings})
    outcome = run_once(cfg, _ui(ui, verbose), keep=keep)
    if check:
        raise_for_outcome(outcome)
    return outcome


def plan(
    run: str | None = None,
    target: str | None = None,
    nodes: int | None = None,
    *,
    config: str | Path | None = None,
    **settings: Any,
) -> str:
    """What [`deploy`][syndeo.api.deploy] would start (scripts, settings, commands), as text; starts
    nothing."""
    from syndeo.launcher.deploy import plan as planned

    return planned(_config(config, {"run": run, "target": target, "nodes": nodes, **settings}))
