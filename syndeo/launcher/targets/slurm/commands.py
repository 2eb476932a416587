"""Thin wrappers over the Slurm CLI: submit, query, cancel, list partitions.

Only the commands every site has (sbatch, squeue, scontrol, sinfo, scancel); no slurmdbd
is assumed: a finished job is read from ``squeue -t all`` while the controller still
remembers it (MinJobAge), from ``sacct`` after that only where accounting runs.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from syndeo.core.errors import ConfigError, TargetError
from syndeo.launcher.targets.base import StartRefused

# States in which the job and all its processes are gone.
TERMINAL = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
# How long a query rides out a controller that does not answer (a restart, a
# failover, an overloaded slurmctld) before the caller is told.
QUERY_DEADLINE_S = 300.0


class SlurmUnreachable(TargetError):
    """scontrol could not get an answer from the controller (may pass)."""


def _slurm(
    argv: Sequence[str],
    timeout: float = 30.0,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise TargetError(
            f"{argv[0]} not found: run on a Slurm login node (or start the local test "
            "cluster with `invoke slurm.up`)"
        )
    try:
        return subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**{k: v for k, v in os.environ.items() if k not in unset}, **(env or {})}
            if env or unset
            else None,
        )
    except subprocess.TimeoutExpired:
        raise SlurmUnreachable(
            f"`{' '.join(argv)}` did not answer within {timeout:.0f} s"
        ) from None


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str  # PENDING, RUNNING, ... ("UNKNOWN" once the controller forgot the job)
    reason: str = ""
    exit_code: int = 0
    signal: int = 0
    nodes: str = ""
    restarts: int = 0
    batch_host: str = ""

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL or self.state == "UNKNOWN"


def partitions() -> dict[str, int]:
    """Partition name -> number of nodes (the default partition's '*' removed)."""
    proc = _slurm(["sinfo", "-h", "-o", "%P %D"])
    if proc.returncode != 0:
        raise TargetError(f"cannot reach Slurm: {_last_line(proc)}")
    out: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        name, _, count = line.strip().partition(" ")
        if name:
            out[name.rstrip("*")] = out.get(name.rstrip("*"), 0) + int(count or 0)
    return out


def default_partition() -> str | None:
    proc = _slurm(["sinfo", "-h", "-o", "%P"])
    return next((p.rstrip("*") for p in proc.stdout.split() if p.endswith("*")), None)


def check_partition(name: str | None, nodes: int) -> None:
    """ConfigError if the partition is unknown or smaller than the job."""
    parts = partitions()
    part = name or default_partition()
    if part is None:
        raise ConfigError("this Slurm cluster has no default partition: set slurm.partition")
    if part not in parts:
        known = ", ".join(sorted(parts)) or "none"
        raise ConfigError(f"unknown Slurm partition {part!r}; available: {known}")
    if nodes > parts[part]:
        raise ConfigError(
            f"the job asks for {nodes} nodes but partition {part!r} has only {parts[part]}"
        )


def check_partition_gpus(
    name: str | None, gres: str, gpus: int, nodes: int, what: str, kind: str | None = None
) -> None:
    """ConfigError unless ``nodes`` nodes of the partition each offer ``gpus`` of ``gres``
    (of type ``kind``, e.g. a100, when given)."""
    part = name or default_partition()
    proc = _slurm(["sinfo", "-h", "-N", "-o", "%N %G"] + (["-p", part] if part else []))
    if proc.returncode != 0:
        raise TargetError(f"cannot reach Slurm: {_last_line(proc)}")
    counts = {}
    for line in proc.stdout.splitlines():
        node, _, field = line.strip().partition(" ")
        counts[node] = _gres_count(field, gres, kind)
    if not any(counts.values()):
        named = f"{gres}:{kind}" if kind else gres
        raise ConfigError(
            f"{what} asks for {gpus} GPU(s) per node but partition {part!r} has no {named!r} "
            "resources (pick a GPU partition with slurm.partition, or another slurm.gpu_type)"
        )
    fit = sum(1 for c in counts.values() if c >= gpus)
    if fit < nodes:
        raise ConfigError(
            f"{what} asks for {nodes} node(s) with {gpus} GPU(s) each but partition {part!r} "
            f"has {fit} such node(s)"
        )


def _gres_count(field: str, gres: str, kind: str | None = None) -> int:
    """GPUs of kind ``gres`` (and type ``kind``, if given) in sinfo's %G (``gpu:2``,
    ``gpu:a100:4(S:0-1)``, ``(null)``)."""
    total = 0
    for item in field.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != gres or len(parts) < 2 or not parts[-1].isdigit():
            continue
        if kind is None or (len(parts) == 3 and parts[1] == kind):
            total += int(parts[-1])
    return total


# What Slurm's commands need to find the site's configuration: kept when a job's
# own Slurm variables are stripped from sbatch's environment.
KEPT_SLURM_ENV = frozenset({"SLURM_CONF"})


def inherited_slurm_env(environ: Mapping[str, str]) -> list[str]:
    """The ``SLURM_*``/``SBATCH_*`` variables of ``environ`` a new job must not inherit.

    Inside a job (the watcher's, an ``salloc`` shell) they describe that job: with
    ``--export=ALL`` its ``SLURM_MEM_PER_NODE`` would reach the new job's ``srun``
    ("mutually exclusive" beside the ``SLURM_MEM_PER_CPU`` of a site's DefMemPerCPU) or
    size Ray's memory; ``SBATCH_*`` would override the script's own ``#SBATCH`` lines."""
    return sorted(
        k for k in environ if k.startswith(("SLURM_", "SBATCH_")) and k not in KEPT_SLURM_ENV
    )


# sbatch's refusals (Slurm's slurm_errno.c wording), by what a retry can expect: the
# same request never passes (a bad account, partition, QOS or shape), or it may once a
# limit lifts or an admin brings the partition back (QOS/association limits, a partition
# INACTIVE or DRAIN).  Anything else (a busy or unreachable controller) is transient.
_PERMANENT = (
    "invalid account",
    "invalid partition",
    "invalid qos",
    "invalid generic resource",
    "invalid feature",
    "node configuration is not available",
    "not permitted to use this partition",
    "requested time limit is invalid",
    "node count specification invalid",
    "access/permission denied",
)
_QUOTA = (
    "partition not available",
    "inactive",
    "job violates accounting/qos policy",
    "qosmax",
    "assocmax",
    "job submit limit",
    "maxsubmit",
)


def refusal_kind(said: str) -> str:
    """``"permanent"``, ``"quota"`` or ``"transient"``: what sbatch's message ``said``
    lets a retry expect (:class:`StartRefused`)."""
    low = said.lower()
    if any(p in low for p in _PERMANENT):
        return "permanent"
    return "quota" if any(q in low for q in _QUOTA) else "transient"


# How long sbatch may take to answer.  One that does not (a busy controller) may have
# queued the job all the same: see :func:`submit`'s ``marker``.
SUBMIT_TIMEOUT_S = 60.0
# The markers of this process's submissions whose sbatch did not answer: their job may
# exist, so each is looked up before it is submitted again.
_UNANSWERED: set[str] = set()


def submit(
    script: str,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    options: Sequence[str] = (),
    export: str = "ALL",
    marker: str | None = None,
) -> str:
    """Submit the batch script ``script`` (its text); the job id.

    The text goes to sbatch on its standard input, never as a file sbatch reads back:
    a job dir on a shared filesystem may be writable by others, and a file written
    there could be swapped between our write and sbatch's read.  ``env``: variables
    added to sbatch's environment, which the job inherits (secrets the script only
    names); ``unset``: variables of ours sbatch must not pass on; ``options``: sbatch
    options known only at submission (a dependency on another job).

    ``--export=ALL`` whatever the user's ``SBATCH_EXPORT`` says (NONE on some sites'
    login nodes): the script exports every setting itself, but the secrets it only
    names reach the job through sbatch's environment.  ``export="NONE"``: a job that
    needs nothing of it (the script sets what it needs).  No ``SLURM_*``/``SBATCH_*``
    variable of ours reaches sbatch but ``SLURM_CONF`` (:func:`inherited_slurm_env`).

    ``marker``: what names this one job of the cluster (its rank), kept as the job's
    comment.  An sbatch that does not answer within ``SUBMIT_TIMEOUT_S`` may have
    queued the job before the controller's reply was lost: the job is then looked up by
    its name and marker and adopted, now and before any later submission with the same
    marker -- a retry never makes a second job for the same rank."""
    argv = ["sbatch", "--parsable", f"--export={export}", *options]
    if marker is not None:
        if marker in _UNANSWERED and (found := adopt(script, marker)) is not None:
            _UNANSWERED.discard(marker)
            return found
        argv.append(f"--comment={marker}")
    unset = [*unset, *inherited_slurm_env(os.environ)]
    try:
        proc = _slurm(argv, timeout=SUBMIT_TIMEOUT_S, stdin=script, env=env, unset=unset)
    except SlurmUnreachable:
        if marker is None:
            raise
        _UNANSWERED.add(marker)
        if (found := adopt(script, marker)) is None:
            raise
        _UNANSWERED.discard(marker)
        return found
    if proc.returncode != 0:
        said = _last_line(proc).removeprefix("sbatch: ")
        raise StartRefused(f"sbatch refused the job: {said}", refusal_kind(said))
    if marker is not None:
        _UNANSWERED.discard(marker)
    # --parsable prints "<id>" or "<id>;<cluster>".
    return proc.stdout.strip().split(";")[0]


def adopt(script: str, marker: str) -> str | None:
    """The id of this user's job that ``script`` (its ``--job-name``) submitted with
    ``marker`` as its comment and that has not ended, if there is one (one ``squeue``);
    :class:`SlurmUnreachable` if the controller does not answer -- then nobody knows,
    and nothing may be submitted again yet."""
    name = next(
        (
            line.split("=", 1)[1].strip()
            for line in script.splitlines()
            if line.startswith("#SBATCH --job-name=")
        ),
        None,
    )
    user = pwd.getpwuid(os.getuid()).pw_name
    argv = ["squeue", "-h", "-u", user, "-O", "JobID:|,Comment:|"]
    proc = _slurm([*argv, f"--name={name}"] if name else argv)
    if proc.returncode != 0:
        raise SlurmUnreachable(f"cannot look up the job of {marker}: {_last_line(proc)}")
    for line in proc.stdout.splitlines():
        job_id, _, rest = line.partition("|")
        if rest.rstrip("|").strip() == marker:
            return job_id.strip()
    return None


def job_info(
    job_id: str,
    deadline_s: float = QUERY_DEADLINE_S,
    on_retry: Callable[[str], None] | None = None,
) -> JobInfo:
    """One job's state now, retrying a controller that does not answer for up to
    ``deadline_s`` (then :class:`SlurmUnreachable`).  For one-off questions (tests,
    benchmarks): a launcher asks through its rate-limited
    :class:`~syndeo.launcher.targets.slurm.queue.JobQueue`."""

    def said(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(f"{state.outcome.exception()}; retrying for up to {deadline_s:.0f} s")

    retrying = Retrying(
        retry=retry_if_exception_type(SlurmUnreachable),
        stop=stop_after_delay(deadline_s),
        wait=wait_exponential_jitter(initial=1, max=15),
        before_sleep=said,
        reraise=True,
    )
    return retrying(query_jobs, [str(job_id)])[str(job_id)]


# One squeue line per job ("|" ends each field; size 0: no padding, no cut).
_SQUEUE_FIELDS = ("JobID", "State", "Reason", "RestartCnt", "exit_code", "BatchHost", "NodeList")
_SQUEUE_FORMAT = ",".join(f"{f}:|" for f in _SQUEUE_FIELDS)


def query_jobs(job_ids: Sequence[str]) -> dict[str, JobInfo]:
    """Every job of ``job_ids`` in ONE ``squeue`` call (``-t all``: ended jobs too, while
    the controller remembers them, MinJobAge); one ``sacct`` call for those it forgot,
    where accounting runs; "UNKNOWN" for the rest.  :class:`SlurmUnreachable` if the
    controller does not answer."""
    ids = [str(j) for j in job_ids]
    if not ids:
        return {}
    proc = _slurm(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-O", _SQUEUE_FORMAT])
    # A single unknown id is an error to squeue; several are an empty answer.
    if proc.returncode != 0 and "Invalid job id" not in (proc.stderr + proc.stdout):
        # Anything else (connection refused, socket timed out, controller busy)
        # is the controller's state, not the jobs'.
        raise SlurmUnreachable(f"cannot query Slurm jobs {','.join(ids)}: {_last_line(proc)}")
    out = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        info = _squeue_line(line)
        if info is not None and info.job_id in ids:
            out[info.job_id] = info
    gone = [j for j in ids if j not in out]
    out.update(_accounted(gone) if gone else {})
    for j in gone:
        out.setdefault(j, JobInfo(j, "UNKNOWN", "the controller no longer knows this job"))
    return out


def _squeue_line(line: str) -> JobInfo | None:
    fields = [f.strip() for f in line.split("|")]
    if len(fields) < len(_SQUEUE_FIELDS):
        return None
    job_id, state, reason, restarts, code, batch_host, nodes = fields[: len(_SQUEUE_FIELDS)]
    exit_code, signal = _wait_status(code)
    return JobInfo(
        job_id=job_id,
        state=state,
        reason=reason,
        exit_code=exit_code,
        signal=signal,
        nodes="" if nodes in ("(null)", "N/A") else nodes,
        restarts=int(restarts) if restarts.isdigit() else 0,
        batch_host="" if batch_host in ("(null)", "N/A") else batch_host,
    )


def _wait_status(field: str) -> tuple[int, int]:
    """(exit code, signal) from squeue's exit_code: the raw wait status (768: exit 3)."""
    raw = int(field) if field.isdigit() else 0
    return (0, raw & 0x7F) if raw & 0x7F else (raw >> 8, 0)


def _exit_status(field: str) -> tuple[int, int]:
    """(exit code, signal) from sacct's ``code:signal``."""
    code, _, sig = field.partition(":")
    return (int(code) if code.isdigit() else 0, int(sig) if sig.isdigit() else 0)


def _accounted(job_ids: Sequence[str]) -> dict[str, JobInfo]:
    """Jobs the controller forgot, from slurmdbd (one ``sacct``); {} where the site keeps
    no accounting, or it does not answer (the caller then calls them UNKNOWN)."""
    fields = "JobID,State,ExitCode,NodeList"
    try:
        proc = _slurm(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", fields])
    except (SlurmUnreachable, TargetError):
        return {}
    out = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        parts = line.split("|")
        if len(parts) == 4 and parts[0] in job_ids:
            code, sig = _exit_status(parts[2])
            # "CANCELLED by 1000": the state is the first word.
            state = parts[1].split()[0] if parts[1].strip() else "UNKNOWN"
            out[parts[0]] = JobInfo(parts[0], state, "", code, sig, parts[3])
    return out


def hostnames(nodelist: str) -> list[str]:
    """A Slurm node list (``node[1-3]``) expanded, in Slurm's order; [] if it cannot be.
    (``scontrol show hostnames`` only expands the list: it asks no daemon.)"""
    return list(_expanded(nodelist))


@functools.lru_cache(maxsize=64)
def _expanded(nodelist: str) -> tuple[str, ...]:
    try:
        proc = _slurm(["scontrol", "show", "hostnames", nodelist])
    except SlurmUnreachable:
        return ()
    if proc.returncode != 0:
        _expanded.cache_clear()  # a failure is not remembered
        return ()
    return tuple(proc.stdout.split())


def cancel(*job_ids: str) -> None:
    """Cancel the jobs, all in one ``scancel``."""
    if not job_ids:
        return
    proc = _slurm(["scancel", *job_ids])
    if proc.returncode != 0 and "already completed" not in proc.stderr.lower():
        raise TargetError(f"scancel {' '.join(job_ids)} failed: {_last_line(proc)}")
