"""Typed settings of a Slurm job: the ``[slurm]`` section of the config plus the cluster shape.

Everything is checked here, before anything is submitted, so a bad value is one
clear line instead of a job that fails in the queue minutes later.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from syndeo.core.errors import ConfigError
from syndeo.launcher.config import one_line

# SYNDEO_SCRATCH is <scratch_dir>/sy-<job id>-<rank>; node settings cap it at 40
# characters (Ray's Unix sockets live below it), so the base must stay short.
MAX_SCRATCH_DIR_LEN = 20
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$|^(UNLIMITED|INFINITE)$")
_SECONDS_RE = re.compile(r"^(\d+)\s*(s|m)?$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
# The scratch dir is part of a shell word in the script, of apptainer's --bind src:dst
# and of Ray's socket paths: the same characters as terraform/modules/node's scratch_dir.
_SCRATCH_RE = re.compile(r"^/[A-Za-z0-9._/-]*$")
# sbatch itself (not bash) reads the #SBATCH lines the job dir appears in: it splits at
# whitespace, reads quotes and backslashes its own way, stops at '#', expands '%'
# patterns; a line break (or any control character) would end the line and start code.
_SBATCH_UNSAFE_RE = re.compile(r"[\x00-\x20\x7f\"'\\#%]")


def check_job_dir(path: Path, what: str = "slurm.job_dir") -> None:
    """Refuse (one line) a job dir the script's ``#SBATCH --output`` line cannot hold."""
    m = _SBATCH_UNSAFE_RE.search(str(path))
    if m:
        raise ConfigError(
            f"{what}: {str(path)!r} holds {m.group()!r}; use a path without whitespace, "
            "control characters, quotes, backslashes, '#' or '%' (sbatch reads it from "
            "an #SBATCH line)"
        )


class SlurmSettings(BaseModel):
    """The ``[slurm]`` config section (site and queue choices; shape comes from the top level)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: str | None = None  # None = the cluster's default partition
    time: str = "00:30:00"
    account: str | None = None
    qos: str | None = None
    # How GPUs are requested: a generic resource per node (--gres), or Slurm's
    # --gpus-per-node / --gpus-per-task.
    gpu_request: Literal["gres", "gpus-per-node", "gpus-per-task"] = "gres"
    gres_name: str = "gpu"
    # A typed GPU (sites that route by it): a100 makes --gres=gpu:a100:N (or
    # --gpus-per-node=a100:N); None: any GPU.
    gpu_type: str | None = None
    # Look at the partition (sinfo: size, GPUs) before submitting; off for sites that
    # route jobs by QOS or constraint without a partition of their own.
    preflight: bool = True
    # More options for the srun that starts one node per task (long options).
    extra_srun: list[str] = []
    # Node-local base dir for Ray's temp files (short: Unix socket path limit).
    scratch_dir: Path = Path("/tmp")
    # Shared filesystem dir for job scripts, logs, rank-0 exit status and the default
    # file rendezvous; $VARIABLES of the login shell are expanded ("$SCRATCH/syndeo",
    # where sites want job files).  None = $SYNDEO_HOME/slurm.
    job_dir: Path | None = None
    # None: the site's JobRequeue decides (no #SBATCH line); true/false: --requeue /
    # --no-requeue.
    requeue: bool | None = None
    # Seconds (or "2m") before the time limit at which the job is warned (sbatch
    # --signal=B:USR1@<s>): the workload and running `submit` jobs get SIGUSR1 as their
    # checkpoint hook.  None: no warning (a workload without a handler would die of it).
    signal_before: int | None = None
    # How often a job warned of its time limit requeues itself to continue (0: never;
    # needs signal_before, and a requeueable job).
    max_requeues: int = Field(default=0, ge=0, le=1000)
    # Keep the job running when a worker node fails (Ray recreates lost work).
    tolerate_node_loss: bool = True
    # Interface whose IPv4 address Ray uses (e.g. ib0); None = the route to the batch node.
    interface: str | None = None
    # Bare mode: the interpreter on the compute nodes (None = this one, shared FS assumed).
    python: str | None = None
    # Extra directories bound into the container (besides scratch, job dir, rendezvous, workdir).
    binds: list[Path] = []
    extra_sbatch: list[str] = []
    # Where the watcher of an `up` cluster runs: "login", a process beside the launcher
    # on this host; "job", a one-CPU job of its own (sites with load-balanced login
    # nodes or rules against daemons there).  A job needs $SYNDEO_HOME and this Python
    # on the shared filesystem, and a file:// rendezvous (no cloud credentials in a job).
    watcher: Literal["login", "job"] = "login"
    # More sbatch options for that job only (e.g. a partition for small jobs).
    watcher_sbatch: list[str] = []
    job_name: str | None = None  # None = the cluster id (what `invoke slurm.cancel` matches)

    @field_validator("partition", "account", "qos", "gres_name", "gpu_type", "job_name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a valid Slurm name")
        return v

    @field_validator("time")
    @classmethod
    def _time(cls, v: str) -> str:
        if not _TIME_RE.match(v):
            raise ValueError(f"{v!r} is not a Slurm time limit (e.g. 30, 01:00:00, 1-12:00:00)")
        return v

    def time_limit_s(self) -> float | None:
        """The job's time limit in seconds (None: unlimited), by sbatch's --time formats:
        M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
        if self.time in ("UNLIMITED", "INFINITE"):
            return None
        if not any(c not in "0:-" for c in self.time):
            return None  # sbatch: "a time limit of zero requests that no time limit be imposed"
        days, _, rest = self.time.rpartition("-")
        parts = [int(x) for x in rest.split(":")]
        if days:  # D-H, D-H:M, D-H:M:S: hours first
            h, m, sec = [*parts, 0, 0][:3]
        elif len(parts) == 3:  # H:M:S
            h, m, sec = parts
        else:  # M, M:S: minutes first
            h, (m, sec) = 0, [*parts, 0][:2]
        return float(((int(days or 0) * 24 + h) * 60 + m) * 60 + sec)

    @field_validator("signal_before", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> object:
        """120, "120", "120s", "2m": seconds (sbatch's --signal takes 0..65535)."""
        if isinstance(v, str):
            m = _SECONDS_RE.match(v.strip())
            if not m:
                raise ValueError(f'{v!r} is not a duration (e.g. 120, "90s", "2m")')
            v = int(m.group(1)) * (60 if m.group(2) == "m" else 1)
        if isinstance(v, int) and not isinstance(v, bool) and not 1 <= v <= 65535:
            raise ValueError(f"{v} s: give 1 to 65535 seconds (sbatch --signal's range)")
        return v

    @model_validator(mode="after")
    def _continuation(self) -> SlurmSettings:
        limit = self.time_limit_s()
        if self.signal_before is not None and limit is not None and self.signal_before >= limit:
            raise ValueError(
                f"signal_before ({self.signal_before} s) must be shorter than the time limit "
                f"({limit:.0f} s)"
            )
        if self.max_requeues and self.signal_before is None:
            raise ValueError("max_requeues needs signal_before (the warning that starts a requeue)")
        if self.max_requeues and self.requeue is False:
            raise ValueError("max_requeues needs a requeueable job: drop requeue = false")
        return self

    @field_validator("scratch_dir")
    @classmethod
    def _scratch(cls, v: Path) -> Path:
        if not _SCRATCH_RE.match(str(v)):
            raise ValueError(
                f"{str(v)!r}: use an absolute path of letters, digits and . _ - / only "
                "(it is part of a shell word, an apptainer bind and Ray's socket paths)"
            )
        if len(str(v)) > MAX_SCRATCH_DIR_LEN:
            raise ValueError(
                f"{str(v)!r} is too long: keep it <= {MAX_SCRATCH_DIR_LEN} characters "
                "(Ray's Unix socket paths below it must fit in 107 bytes)"
            )
        return v

    @field_validator("job_dir", mode="before")
    @classmethod
    def _site_variables(cls, v: object) -> object:
        """``$SCRATCH/syndeo``: the site's variables of this (login) shell, expanded here;
        one that is not set is named rather than left in the path."""
        if not isinstance(v, str | Path) or "$" not in str(v):
            return v
        expanded = os.path.expandvars(str(v))
        if "$" in expanded:
            unset = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)
            raise ValueError(f"{str(v)!r} names ${unset[0] if unset else '?'}, not set here")
        return expanded

    @field_validator("job_dir")
    @classmethod
    def _job_dir(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_absolute():
            raise ValueError("must be an absolute path")
        if v is not None:
            try:
                check_job_dir(v, "it")
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("it: ")) from None
        return v

    @field_validator("interface")
    @classmethod
    def _iface(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[A-Za-z0-9_.:-]{1,15}$", v):
            raise ValueError(f"{v!r} is not a network interface name")
        return v

    @field_validator("extra_sbatch", "extra_srun", "watcher_sbatch")
    @classmethod
    def _extra(cls, v: list[str]) -> list[str]:
        for arg in v:
            if not arg.startswith("--") or "\n" in arg:
                raise ValueError(f"{arg!r}: give long options like '--mail-type=END'")
        return v

    @classmethod
    def parse(cls, data: dict[str, object], prefix: str = "slurm") -> SlurmSettings:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(one_line(exc, "settings", prefix=prefix)) from None


class JobShape(BaseModel):
    """Size of the job, from the top-level config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int = Field(ge=1, le=4096)
    cpus_per_node: int = Field(ge=1, le=1024)
    gpus_per_node: int = Field(default=0, ge=0, le=64)
    memory_mb_per_node: int | None = Field(default=None, ge=256)
