"""The per-node contract: every target configures ``syndeo node`` with these variables.

Launchers build a :class:`NodeSettings` and call :meth:`NodeSettings.to_env`; the
node parses them back with :meth:`NodeSettings.from_env`.  Keeping both directions
in one class means a target cannot drift from what the node reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from syndeo.core.clouds import Cloud
from syndeo.core.errors import ConfigError
from syndeo.core.groups import GROUP_NAME_RE, parse_autoscaled, parse_expected
from syndeo.core.launchkey import KEY_RE
from syndeo.core.option import duration_field, option

PREFIX = "SYNDEO_"
# The one secret among the settings: never shown in a script, log or record.
LAUNCH_KEY_VAR = PREFIX + "LAUNCH_KEY"
# A containerised node's whole environment comes on this inherited descriptor (a pipe
# the launching shell fills and closes), never in the container's environment: with
# ``--containall`` Apptainer's init shim (PID 1 of the container, readable by every task
# of the same user) keeps that environment, as JSON, in its own /proc/1/environ.  The
# container gets only ``SYNDEO_ENV_FD``; the node reads the pipe to its end first thing.
ENV_FD_VAR = PREFIX + "ENV_FD"
ENV_FD = 3


def encode_env(env: Mapping[str, str]) -> bytes:
    """``env`` as the node reads it from :data:`ENV_FD`: ``NAME=value`` entries, each
    ended by a NUL (no value of an environment can hold one; newlines and commas can)."""
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())


def decode_env(data: bytes) -> dict[str, str]:
    """The inverse of :func:`encode_env`; entries without a name are errors."""
    out: dict[str, str] = {}
    for entry in data.split(b"\0"):
        if not entry:
            continue
        name, sep, value = entry.decode().partition("=")
        if not sep or not name.isidentifier():
            raise ConfigError(f"malformed entry in the node's environment pipe: {name[:40]!r}")
        out[name] = value
    return out


def load_env_fd(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Read the environment a launcher sent on ``$SYNDEO_ENV_FD`` into ``environ`` (to its
    end, then closed); the names read, or [] when there was no such descriptor."""
    fd = environ.pop(ENV_FD_VAR, None)
    if fd is None:
        return []
    if not fd.isdigit():
        raise ConfigError(f"{ENV_FD_VAR} must be a file descriptor number, not {fd[:20]!r}")
    try:
        with os.fdopen(int(fd), "rb") as pipe:
            data = pipe.read()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the node's environment on fd {fd}: {exc.strerror}"
        ) from None
    env = decode_env(data)
    environ.update(env)
    return sorted(env)


# Unix socket paths are limited to 107 bytes; Ray nests ~60 bytes of session and
# socket names below its temp dir, so the scratch dir must stay short.
MAX_SCRATCH_LEN = 40

# Cluster ids name buckets, prefixes, Slurm jobs and VMs: short, lower case, no dots.
CLUSTER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# How long a node above its group's min_nodes may stay idle when idle_timeout is not set.
IDLE_TIMEOUT_S = 300.0
# How long past autostop an idle cloud cluster whose watcher is gone waits before its
# nodes stop it and power their VMs off, when autostop_grace is not set.
AUTOSTOP_GRACE_S = 600.0


class ClusterOptions(BaseModel):
    """The node settings every node of a cluster shares, declared once.

    Each field is at the same time a user setting (a ``DeployConfig`` field: TOML, and an
    option of both command lines through :func:`option`), a field of the launcher's
    ``ClusterSpec``, a node variable ``SYNDEO_<FIELD>`` (:class:`NodeSettings`) and an
    attribute of the Terraform node module's ``node.settings``, whose type and rules
    scripts/tf_generate.py writes from here (tests/iac/test_roots.py diffs them).  A new
    setting of this kind is a field here, the node code that reads it, and a test.

    Rules for a field: a bool, int, float, str or Literal (or one of them | None, None
    meaning "not set"), its default and bounds (``ge``/``gt``/``le``/``lt``) given here;
    the same value on every node (a per-rank or per-group value belongs in
    :class:`NodeSettings` and its own Terraform attribute).
    """

    # Ray's dashboard on the head (127.0.0.1; `up` turns it on); workers ignore it.  Off
    # unless asked for: it is seconds of CPU at start-up and teardown (measured with the
    # bring-up timeline).
    dashboard: bool = option(
        False,
        "Ray's dashboard on the head's 127.0.0.1 (default: off for deploy, on for up)",
        flag="negatable",
    )
    # How long a node above its group's min_nodes stays idle before Ray's autoscaler on
    # the head lets it go (groups with max_nodes only; syndeo/node/autoscaler.py).
    # None: IDLE_TIMEOUT_S (not rendered, so a fixed-size cluster's nodes never see it).
    idle_timeout_s: float | None = option(
        None,
        "a node above its group's min_nodes idle this long is released (default 5m)",
        name="idle_timeout",
        duration=True,
        gt=0,
        le=7 * 86400,
    )

    # The watcher of an `up` cluster takes it down once it has had no job and no Ray task
    # for this long (syndeo/launcher/autoscale.py).  A node setting too: on the clouds,
    # with autostop_grace, the head stops an idle cluster itself when the watcher is gone
    # (a closed laptop) and every VM powers itself off (syndeo/node/poweroff.py).
    autostop_s: float | None = option(
        None,
        "up: take the cluster down after it has been idle this long, e.g. 30m (default: never)",
        name="autostop",
        duration=True,
        gt=0,
        le=30 * 86400,
    )
    # None: AUTOSTOP_GRACE_S (not rendered, so a cluster that never names it carries no
    # variable).  Only the cloud targets power off (syndeo/launcher/autoscale.py refuses
    # it elsewhere).
    autostop_grace_s: float | None = option(
        None,
        "up, aws/gcp/azure: when the watcher is gone, the VMs power themselves off this "
        "long after autostop (default 10m)",
        name="autostop_grace",
        duration=True,
        ge=0,
        le=7 * 86400,
    )

    # What keeps an `up` cluster from autostop besides Ray's own activity, pending demand
    # and nodes on their way (syndeo/node/autoscale.py, docs/autoscale.md): "drivers" (a
    # connected `ray.init` driver too), "jobs" (submitted jobs only) or "none" (autostop is a
    # time limit from the start).  None: "drivers" (not rendered).
    autostop_wait_for: Literal["drivers", "jobs", "none"] | None = option(
        None,
        "up: what holds off autostop besides tasks, pending demand and starting nodes: "
        "drivers (a connected ray.init too; default), jobs (submitted jobs only) or none "
        "(autostop counts from the start)",
    )

    # Whose GPUs the nodes have: how the container is given them (apptainer --nv or
    # --rocm) and which variables name a node's devices -- one table, syndeo/core/gpus.py.
    # None: NVIDIA (not rendered, so a cluster that never names it carries no variable).
    gpu_vendor: Literal["nvidia", "amd"] | None = option(
        None,
        "GPU vendor: nvidia (--nv, CUDA_VISIBLE_DEVICES) or amd (--rocm, "
        "ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES); default nvidia",
    )

    @field_validator("idle_timeout_s", "autostop_s", "autostop_grace_s", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        return duration_field(v)

    @model_validator(mode="after")
    def _wait_for_needs_autostop(self) -> ClusterOptions:
        if self.autostop_wait_for is not None and self.autostop_s is None:
            raise ValueError("autostop_wait_for says what holds off autostop: add --autostop")
        return self


def cluster_options(settings: ClusterOptions) -> dict[str, Any]:
    """The :class:`ClusterOptions` fields of ``settings`` (a config, a spec), as values."""
    return {name: getattr(settings, name) for name in ClusterOptions.model_fields}


class NodeSettings(ClusterOptions):
    """Everything one node needs; field ``x`` is read from ``SYNDEO_X``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_id: str
    rank: int = Field(ge=0)
    nodes: int = Field(ge=1, le=4096)
    rendezvous: str
    scratch: Path
    # The trusted directory the scratch path starts below (e.g. /var/tmp): every level
    # between it and ``scratch`` must be ours and private (syndeo.core.securedir).  None:
    # the deepest level that exists already -- right only where the launcher made and
    # checked the levels above the node's own dir itself.
    scratch_base: Path | None = None
    cpus: int = Field(default=1, ge=0)
    gpus: int = Field(default=0, ge=0)
    memory_mb: int | None = Field(default=None, ge=256)
    object_store_mb: int | None = Field(default=None, ge=80)
    node_ip: str | None = None
    attempt: int = Field(default=0, ge=0)
    join_timeout: float = Field(default=300.0, gt=0)
    run: str = ""  # workload command for rank 0; empty = serve until stopped
    workdir: Path | None = None
    # The head only: the sha256 of the work dir the launcher packed into the rendezvous
    # for the workload (a target whose machines do not share its files); the head runs
    # the workload in its unpacked copy, which Ray ships to every node (syndeo/node/workdir.py).
    workdir_digest: str | None = None
    # Every node: the sha256 of the wheels the launcher resolved for the workload
    # (--requirements) and put in the rendezvous; installed before Ray starts.
    wheelhouse_digest: str | None = None
    target: str = "manual"
    not_before: float | None = None
    image_digest: str | None = None  # recorded in results manifests when nodes run in an image
    # Node groups (syndeo/core/groups.py); None = a cluster without groups, as before.
    group: str | None = None  # this node's group: its Ray label syndeo-group
    groups: str | None = None  # every group's name:nodes:min_nodes (the head's readiness rule)
    # The groups that follow demand, name:min:max:cpus:gpus:memory_mb each (the head runs
    # Ray's autoscaler for them: syndeo/node/autoscaler.py); None: a fixed-size cluster.
    autoscale: str | None = None
    # A spot/preemptible VM: the cloud whose interruption notice this node watches
    # (syndeo/node/preemption.py); None = not watched.
    spot_notices: Cloud | None = None
    # Where that cloud's metadata service is (default: its real address).  Tests point
    # it at a fake; "{rank}" in it becomes this node's rank (one fake, many nodes).
    metadata_url: str | None = None
    # This launch's key (syndeo/core/launchkey.py): the head signs its record with it and
    # workers join only a head whose record verifies.  A secret: kept out of repr (and so
    # out of every log line and error that shows the settings).  None: a node started by
    # hand without one trusts any head record of its cluster id and attempt, as before.
    launch_key: str | None = Field(default=None, repr=False)

    @field_validator("launch_key")
    @classmethod
    def _launch_key(cls, v: str | None) -> str | None:
        if v is not None and not KEY_RE.match(v):
            raise ValueError("must be 64 lower-case hex digits")  # never echo the value
        return v

    @field_validator("workdir_digest", "wheelhouse_digest")
    @classmethod
    def _digest(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-f]{64}", v):
            raise ValueError("must be a sha256: 64 lower-case hex digits")
        return v

    @field_validator("group")
    @classmethod
    def _group(cls, v: str | None) -> str | None:
        if v is not None and not GROUP_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a group name")
        return v

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: str | None) -> str | None:
        if v is not None:
            parse_expected(v)  # ValueError names the bad part
        return v

    @field_validator("autoscale")
    @classmethod
    def _autoscale(cls, v: str | None) -> str | None:
        if v is not None:
            parse_autoscaled(v)  # ValueError names the bad part
        return v

    def expected_groups(self) -> dict[str, tuple[int, int]]:
        """{group: (nodes, min_nodes)} the head waits for; empty without groups."""
        return parse_expected(self.groups or "")

    @field_validator("cluster_id")
    @classmethod
    def _cluster_id(cls, v: str) -> str:
        if not CLUSTER_ID_RE.match(v):
            raise ValueError("use 1-40 of a-z, 0-9 and '-', starting with a letter or digit")
        return v

    @field_validator("scratch")
    @classmethod
    def _scratch(cls, v: Path) -> Path:
        if not v.is_absolute():
            raise ValueError("must be an absolute path")
        if len(str(v)) > MAX_SCRATCH_LEN:
            raise ValueError(
                f"{str(v)!r} is {len(str(v))} characters; keep it <= {MAX_SCRATCH_LEN} "
                "(Ray's Unix socket paths below it must fit in 107 bytes)"
            )
        return v

    @model_validator(mode="after")
    def _scratch_below_base(self) -> NodeSettings:
        if self.scratch_base is not None and self.scratch_base not in self.scratch.parents:
            raise ValueError(
                f"SYNDEO_SCRATCH_BASE {str(self.scratch_base)!r} is not a parent directory "
                f"of SYNDEO_SCRATCH {str(self.scratch)!r}"
            )
        return self

    @property
    def is_head(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NodeSettings:
        env = os.environ if env is None else env
        values = {
            name: env[PREFIX + name.upper()]
            for name in cls.model_fields
            if env.get(PREFIX + name.upper(), "") != "" or (name == "run" and PREFIX + "RUN" in env)
        }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigError(_one_line(exc)) from None

    def to_env(self) -> dict[str, str]:
        out = {}
        for name, value in self.model_dump().items():
            if value is None or value is False:
                continue  # the default; absent reads back the same (and VMs' env files stay short)
            out[PREFIX + name.upper()] = str(value)
        return out


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        msg = "is required" if err["type"] == "missing" else err["msg"]
        if not err["loc"]:  # a rule across fields names them itself
            parts.append(msg.removeprefix("Value error, "))
            continue
        parts.append(f"{PREFIX}{str(err['loc'][0]).upper()} {msg}")
    return "invalid node environment: " + "; ".join(parts)
