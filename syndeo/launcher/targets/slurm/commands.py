"""Thin wrappers over the Slurm CLI: submit, query, cancel, list partitions.

Only the commands every site has (sbatch, scontrol, sinfo, scancel); no slurmdbd
(``sacct``) is assumed, so a finished job is read from ``scontrol show job``
while the controller still remembers it (MinJobAge).
"""

from __future__ import annotations

import os
import re
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
_KV_RE = re.compile(r"(\w+)=(\S*)")
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


def submit(
    script: str,
    env: Mapping[str, str] | None = None,
    unset: Sequence[str] = (),
    options: Sequence[str] = (),
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
    names reach the job through sbatch's environment."""
    argv = ["sbatch", "--parsable", "--export=ALL", *options]
    proc = _slurm(argv, timeout=60, stdin=script, env=env, unset=unset)
    if proc.returncode != 0:
        raise TargetError(f"sbatch refused the job: {_last_line(proc).removeprefix('sbatch: ')}")
    # --parsable prints "<id>" or "<id>;<cluster>".
    return proc.stdout.strip().split(";")[0]


def job_info(
    job_id: str,
    deadline_s: float = QUERY_DEADLINE_S,
    on_retry: Callable[[str], None] | None = None,
) -> JobInfo:
    """The job's state, retrying a controller that does not answer for up to ``deadline_s``.

    Raises :class:`SlurmUnreachable` once the deadline passes: the caller decides
    what not knowing means (never that the job should be cancelled).
    """

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
    return retrying(_job_info_once, job_id)


def _job_info_once(job_id: str) -> JobInfo:
    proc = _slurm(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0:
        if "Invalid job id" in (proc.stderr + proc.stdout):
            return JobInfo(job_id, "UNKNOWN", "the controller no longer knows this job")
        # Anything else (connection refused, socket timed out, controller busy)
        # is the controller's state, not the job's.
        raise SlurmUnreachable(f"cannot query Slurm job {job_id}: {_last_line(proc)}")
    kv = dict(_KV_RE.findall(proc.stdout))
    code, _, sig = kv.get("ExitCode", "0:0").partition(":")
    return JobInfo(
        job_id=job_id,
        state=kv.get("JobState", "UNKNOWN"),
        reason=kv.get("Reason", ""),
        exit_code=int(code or 0),
        signal=int(sig or 0),
        nodes=kv.get("NodeList", ""),
        restarts=int(kv.get("Restarts", "0") or 0),
        batch_host=kv.get("BatchHost", ""),
    )


def hostnames(nodelist: str) -> list[str]:
    """A Slurm node list (``node[1-3]``) expanded, in Slurm's order; [] if it cannot be."""
    try:
        proc = _slurm(["scontrol", "show", "hostnames", nodelist])
    except SlurmUnreachable:
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


def node_down(name: str) -> bool:
    """True if Slurm has marked the node DOWN or FAILed (it no longer runs anything)."""
    proc = _slurm(["scontrol", "show", "node", "-o", name])
    state = dict(_KV_RE.findall(proc.stdout)).get("State", "")
    return proc.returncode == 0 and any(s in state for s in ("DOWN", "FAIL"))


def cancel(job_id: str) -> None:
    proc = _slurm(["scancel", job_id])
    if proc.returncode != 0 and "already completed" not in proc.stderr.lower():
        raise TargetError(f"scancel {job_id} failed: {_last_line(proc)}")
