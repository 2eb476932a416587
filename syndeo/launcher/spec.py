"""The launcher's data types: a cluster's spec (what every node shares) and a launched
cluster as its target knows it (saved by ``up`` for ``down``, ``grow``, ``shrink``).

Below the targets and the state store, so both can use them without importing each other.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from syndeo.core.errors import ConfigError, TargetError
from syndeo.core.groups import Group, Layout
from syndeo.core.launchkey import new_key
from syndeo.core.nodeconfig import ClusterOptions, NodeSettings, cluster_options
from syndeo.core.tls import ENV_VAR as TLS_VAR
from syndeo.launcher.config import DeployConfig, RecoverySettings


def _workdir(cfg: DeployConfig) -> Path | None:
    """The workload's work dir: the one named, or here -- but only for a program of the
    user's (``--run``): the built-in benchmark and an ``up`` cluster need none, and a
    work dir is bound into every node's container (syndeo/launcher/trusted.py)."""
    if cfg.workdir is None and cfg.run is None:
        return None
    return (cfg.workdir or Path.cwd()).resolve()


@functools.cache
def _digest(image: Path | None) -> str | None:
    if image is None:
        return None
    from syndeo.image.manifest import image_digest  # only when an image is used

    return image_digest(image)


# Where Ray's TLS is on unless the user turns it off: the targets whose nodes talk over
# networks other users share (a Slurm cluster's, the ssh hosts'), where anyone who sees
# the cluster's token in a packet can run code as the user.  Off on loopback (local) and
# on the clouds, where each cluster gets a network of its own.
TLS_BY_DEFAULT = frozenset({"slurm", "ssh"})


def tls_default(target: str) -> bool:
    """Whether a cluster on ``target`` runs Ray's TLS when the config does not say."""
    return target in TLS_BY_DEFAULT


class ClusterSpec(ClusterOptions):
    """Everything about one cluster that does not depend on which machine a node is
    (with every :class:`ClusterOptions` field, passed from the config to the nodes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    cluster_id: str
    rendezvous: str
    nodes: int
    cpus: int
    gpus: int
    memory_mb: int | None
    object_store_mb: int | None
    join_timeout: float
    run: str
    workdir: Path | None
    # The work dir packed into the rendezvous for the workload, by sha256 (deploy --run on
    # a target whose machines do not share the launcher's files); None: run in ``workdir``.
    workdir_digest: str | None = None
    # The workload's extra packages (--requirements), resolved into wheels in the
    # rendezvous by sha256: every node installs them before it starts Ray.
    wheelhouse_digest: str | None = None
    image: Path | None
    image_digest: str | None = None
    not_before: float
    layout: Layout | None = None  # node groups; None = every node shaped as above
    # The rendezvous attempt the nodes start under: 0, then one more for each restart
    # after a lost head ([recovery] max_restarts).  On Slurm a requeue adds to it.
    attempt: int = 0
    # This launch's key (syndeo/core/launchkey.py), made once by from_config: workers join
    # only a head that signed its record with it.  Saved with the launched state (0600)
    # so that grow and replacements of this cluster get the same one; never shown
    # (repr, --dry-run, deploy.json).  None: a spec saved before launch keys existed.
    launch_key: str | None = Field(default=None, repr=False)
    # Ray's TLS (syndeo/core/tls.py): nodes get SYNDEO_TLS=1 with their extra variables.
    tls: bool = False

    def group_of(self, rank: int) -> Group | None:
        """The group of ``rank`` (ranks past the layout, added by grow, must name theirs)."""
        return None if self.layout is None else self.layout.group_of(rank)

    def image_for(self, group: Group | None) -> Path | None:
        return self.image if group is None else group.container

    @classmethod
    def from_config(cls, cfg: DeployConfig, rendezvous: str, cluster_id: str) -> ClusterSpec:
        return cls(
            target=cfg.target,
            cluster_id=cluster_id,
            rendezvous=rendezvous,
            nodes=cfg.nodes,
            cpus=cfg.cpus_per_node,
            gpus=cfg.gpus_per_node,
            memory_mb=cfg.memory_mb_per_node,
            object_store_mb=cfg.object_store_mb_per_node,
            join_timeout=cfg.join_timeout_s,
            run=cfg.workload_command(),
            workdir=_workdir(cfg),
            image=cfg.container,
            image_digest=_digest(cfg.container),
            not_before=time.time(),
            layout=cfg.layout,
            launch_key=new_key(),
            tls=tls_default(cfg.target) if cfg.tls is None else cfg.tls,
            **cluster_options(cfg),
        )

    def node_env(
        self, rank: int, scratch: Path, node_ip: str | None = None, group: Group | None = None
    ) -> dict[str, str]:
        """The whole environment of ``syndeo node`` on one machine, for every launcher.

        Its SYNDEO_* settings plus what the rendezvous backend needs to be reached
        (credentials, endpoints): a node may start with a clean environment
        (``apptainer --cleanenv``, a fresh VM).  Scripts a person reads must not show
        the forwarded values (see :meth:`passthrough_names`).
        """
        from syndeo.rendezvous import passthrough_env

        return {
            **passthrough_env(self.rendezvous),
            **self.extra_env(),
            **self.node_settings(rank, scratch, node_ip, group).to_env(),
        }

    def extra_env(self) -> dict[str, str]:
        """Cluster-wide switches the node reads like a backend's endpoint variables, not
        as node settings (the Terraform node module keeps those to NodeSettings' fields):
        the targets that build :meth:`node_env` get them there, the Terraform ones pass
        them in ``extra_env``."""
        return {TLS_VAR: "1"} if self.tls else {}

    def passthrough_names(self) -> list[str]:
        """Names of the forwarded (non-SYNDEO_*) variables :meth:`node_env` includes."""
        from syndeo.rendezvous import passthrough_env

        return sorted(passthrough_env(self.rendezvous))

    def node_settings(
        self, rank: int, scratch: Path, node_ip: str | None = None, group: Group | None = None
    ) -> NodeSettings:
        """``group``: the node's group (default: the layout's group of ``rank``)."""
        if group is None and self.layout is not None:
            group = self.layout.group_of(rank)
        cpus, gpus, memory_mb, digest = self.cpus, self.gpus, self.memory_mb, self.image_digest
        if group is not None:
            cpus, gpus, memory_mb = group.cpus, group.gpus, group.memory_mb
            if group.container != self.image:
                digest = _digest(group.container)
        return NodeSettings(
            cluster_id=self.cluster_id,
            rank=rank,
            nodes=self.nodes,
            rendezvous=self.rendezvous,
            scratch=scratch,
            cpus=cpus,
            gpus=gpus,
            memory_mb=memory_mb,
            object_store_mb=self.object_store_mb,
            node_ip=node_ip,
            join_timeout=self.join_timeout,
            run=self.run if rank == 0 else "",
            workdir=self.workdir,
            workdir_digest=self.workdir_digest if rank == 0 else None,
            wheelhouse_digest=self.wheelhouse_digest,
            target=self.target,
            not_before=self.not_before,
            image_digest=digest,
            group=group.name if group is not None else None,
            groups=self.layout.expected() if self.layout is not None else None,
            autoscale=(self.layout.autoscaled() or None) if self.layout is not None else None,
            attempt=self.attempt,
            launch_key=self.launch_key,
            **cluster_options(self),
        )


# The shape of ``launched.json``.  Files without a version are those of the previous
# launcher (a free dict under ``data``): :func:`Launched.from_saved` brings them to this
# one.  A version it does not know is refused (:class:`StateVersionError`).
STATE_VERSION = 2


class StateVersionError(TargetError):
    """A state file this launcher cannot read: from a newer (or unknown) launcher."""


class _State(BaseModel):
    # A state file is data others wrote: a key this launcher does not know is an error,
    # never silently dropped (the next save would lose it).
    model_config = ConfigDict(extra="forbid")


class ProcWatcher(_State):
    """A watcher that runs as a process beside the launcher (ended by pid and start time)."""

    pid: int
    create_time: float


class JobWatcher(_State):
    """A watcher that runs as a job of the target's own (e.g. a Slurm job): ``job`` is
    what the target's ``start_watcher`` returned, for its ``stop_watcher``."""

    job: dict[str, Any]


class LedgerEntry(_State):
    """One node ``grow`` or the autoscaler added: when it was asked for and when it ended
    (None while it runs), what ``status`` counts as its cost (syndeo/launcher/ledger.py)."""

    group: str
    rank: int
    start: float
    end: float | None = None


class LocalNode(_State):
    """A node added by ``grow`` on the local target; ``gone`` once ``shrink`` ended it."""

    group: str
    rank: int
    gone: bool = False


class LocalPart(_State):
    """What the local target knows of its nodes: one entry per rank in each list."""

    target: Literal["local"] = "local"
    pids: list[int] = []
    create_times: list[float] = []
    logs: list[str] = []
    scratch: list[str] = []
    # Each rank's CUDA_VISIBLE_DEVICES (a replaced rank sees the same GPUs); None: no GPUs.
    devices: list[str] | None = None
    next_rank: int | None = None  # with groups: the rank `grow` gives next
    grown: list[LocalNode] = []
    # Replaced (drained) nodes that still run until `stop`: (pid, start time) each.
    retired: list[tuple[int, float]] = []


class SlurmEntry(_State):
    """One Slurm job of the cluster: a group's nodes, or a replacement of one rank."""

    group: str | None = None
    job_id: str
    rank_base: int
    nodes: int
    gone: bool = False
    replaces: int | None = None  # the rank it replaces (a replacement's job)


class Requeue(_State):
    attempt: int
    why: str
    at: float


class SlurmPart(_State):
    """What the Slurm target knows of its jobs."""

    target: Literal["slurm"] = "slurm"
    job_id: str
    job_dir: str
    log: str
    attempt_base: int = 0  # the job's attempt is this plus its requeues
    groups: list[SlurmEntry] = []  # with groups: one job each, the head's first
    next_rank: int | None = None
    slurm: dict[str, Any] | None = None  # [slurm] as it was at `up` (for grow)
    group_slurm: dict[str, dict[str, Any]] = {}
    replacements: list[SlurmEntry] = []
    hosts: list[str] = []  # the node of each rank, seen while all ran
    requeues: list[Requeue] = []


class TerraformPart(_State):
    """What a Terraform-backed target (ssh and the clouds) knows of its machines."""

    target: str  # ssh, or a cloud
    module_dir: str
    workspace: str
    join_timeout: float
    machines: dict[str, Any] = {}  # the target's summary (region, types, hosts)
    apply_started: float | None = None
    outputs: dict[str, Any] = {}  # Terraform's outputs after the apply
    head_failure: str | None = None
    done_refused: tuple[str | None, float] | None = None  # an unsigned done record, said once
    head_seen: tuple[float | None, float] | None = None  # (status stamp, when first seen)
    head_asked: float = 0.0
    destroyed: bool = False
    last_rank: int = 0


def _part_kind(value: Any) -> str:
    """Which part a target's is: its own for local and Slurm, else the Terraform one."""
    target = value.get("target") if isinstance(value, dict) else getattr(value, "target", None)
    return target if target in ("local", "slurm") else "terraform"


TargetPart = Annotated[
    Annotated[LocalPart, Tag("local")]
    | Annotated[SlurmPart, Tag("slurm")]
    | Annotated[TerraformPart, Tag("terraform")],
    Discriminator(_part_kind),
]

# The keys of the previous launcher's ``data`` that every target shares (the rest was
# the target's own).
_COMMON_V1 = (
    "spec",
    "recovery",
    "watcher",
    "attempt",
    "autostop_s",
    "renew_gcs_token",
    "draining",
    "demand_ranks",
    "unobserved",
    "owns_rendezvous",
    "destroy_failed",
    "rendezvous_env",
    "ledger",
)


class Launched(_State):
    """A running cluster as its target knows it; saved to disk by ``up`` for ``down``.

    Common fields first, then ``part``: the target's own (a discriminated union on its
    ``target``)."""

    version: int = STATE_VERSION
    target: str
    cluster_id: str
    rendezvous: str
    started_at: float
    spec: ClusterSpec | None = None  # saved by `up` (and with groups): what grow needs
    # The launch key, saved by a Terraform-backed launch before its apply: a deploy saves
    # no spec, and `down` from another shell checks the head's signed word with it (an
    # unsigned one could be planted).  An `up` cluster's spec holds the same key.
    launch_key: str | None = Field(default=None, repr=False)
    recovery: RecoverySettings | None = None
    watcher: ProcWatcher | JobWatcher | None = None
    attempt: int | None = None  # the attempt running now, where the target tracks it
    autostop_s: float | None = None
    renew_gcs_token: bool = False
    draining: list[int] = []  # replaced ranks whose old node still runs
    # Ranks the autoscaler started for demand: replaced by demand, not by [recovery].
    demand_ranks: list[int] = []
    unobserved: bool = False  # the launcher lost sight of it: never cancel it blind
    owns_rendezvous: bool = False  # the target's destroy takes the store with it
    destroy_failed: bool = False
    # Where the launch found its store (names, never secrets): see state.load_launched.
    rendezvous_env: dict[str, str] = {}
    # Every node added since `up`, gone ones too: what `status` counts as cost so far.
    ledger: list[LedgerEntry] = []
    part: TargetPart

    def attempt_or(self, default: int) -> int:
        return self.attempt if self.attempt is not None else default

    def saved_spec(self) -> ClusterSpec:
        """The spec ``up`` saved (a cluster the launcher follows itself saves none)."""
        if self.spec is None:
            raise TargetError(f"cluster {self.cluster_id} has no saved spec (not an `up` cluster)")
        return self.spec

    @property
    def local(self) -> LocalPart:
        return self._part(LocalPart)

    @property
    def slurm(self) -> SlurmPart:
        return self._part(SlurmPart)

    @property
    def tf(self) -> TerraformPart:
        return self._part(TerraformPart)

    def _part(self, kind: type[_P]) -> _P:
        if not isinstance(self.part, kind):
            what = kind.__name__.removesuffix("Part").lower()
            raise TargetError(
                f"cluster {self.cluster_id} was started on {self.target}: it has no {what} state"
            )
        return self.part

    @classmethod
    def from_saved(cls, raw: Any, where: object) -> Launched:
        """The state in ``raw`` (a parsed ``launched.json``), of this or the previous
        version; a newer or unknown one is refused in one line that says what to do."""
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        version = raw.get("version", 1)
        if version == 1:
            raw = _from_v1(raw)
        elif version != STATE_VERSION:
            cid = raw.get("cluster_id", "ID")
            raise StateVersionError(
                f"state file {where} has version {version!r}, this launcher reads "
                f"{STATE_VERSION}: take cluster {cid} down with the launcher that started it "
                f"(`syndeo down --cluster-id {cid}`), or remove {Path(str(where)).parent} "
                "once nothing of it runs"
            )
        return cls.model_validate(raw)


_P = TypeVar("_P", LocalPart, SlurmPart, TerraformPart)


def _from_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """A state file of the previous launcher: its free ``data`` split into the common
    fields and the target's part; its watcher list made a :class:`ProcWatcher`."""
    raw = dict(raw)
    data = dict(raw.pop("data", {}))
    common = {k: data.pop(k) for k in _COMMON_V1 if k in data}
    watcher = common.get("watcher")
    if isinstance(watcher, list):
        common["watcher"] = {"pid": watcher[0], "create_time": watcher[1]}
    if common.get("renew_gcs_token") is None:
        common.pop("renew_gcs_token", None)
    return {**raw, **common, "version": STATE_VERSION, "part": {"target": raw["target"], **data}}


def saved_group(launched: Launched, group: str) -> tuple[ClusterSpec, Group]:
    """The spec an `up` saved and one of its groups, for grow/shrink (one line if unknown)."""
    spec = launched.spec
    if spec is None or spec.layout is None:
        raise ConfigError(
            f"cluster {launched.cluster_id} has no node groups: grow/shrink work on "
            "clusters started with [[groups]]"
        )
    try:
        return spec, spec.layout.group(group)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None


def launched_key(launched: Launched) -> str | None:
    """The cluster's launch key (its saved spec's, else its own), or None if it has none."""
    return launched.spec.launch_key if launched.spec is not None else launched.launch_key
