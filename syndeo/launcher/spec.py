"""The launcher's data types: a cluster's spec (what every node shares) and a launched
cluster as its target knows it (saved by ``up`` for ``down``, ``grow``, ``shrink``).

Below the targets and the state store, so both can use them without importing each other.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from syndeo.core.errors import ConfigError
from syndeo.core.groups import Group, Layout
from syndeo.core.launchkey import new_key
from syndeo.core.nodeconfig import ClusterOptions, NodeSettings, cluster_options
from syndeo.core.tls import ENV_VAR as TLS_VAR
from syndeo.launcher.config import DeployConfig


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


class Launched(BaseModel):
    """A running cluster as its target knows it; saved to disk by ``up`` for ``down``."""

    target: str
    cluster_id: str
    rendezvous: str
    started_at: float
    data: dict[str, Any] = {}


def saved_group(launched: Launched, group: str) -> tuple[ClusterSpec, Group]:
    """The spec an `up` saved and one of its groups, for grow/shrink (one line if unknown)."""
    if "spec" not in launched.data:
        raise ConfigError(
            f"cluster {launched.cluster_id} has no node groups: grow/shrink work on "
            "clusters started with [[groups]]"
        )
    spec = ClusterSpec.model_validate(launched.data["spec"])
    if spec.layout is None:
        raise ConfigError(
            f"cluster {launched.cluster_id} has no node groups: grow/shrink work on "
            "clusters started with [[groups]]"
        )
    try:
        return spec, spec.layout.group(group)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None


def launched_key(launched: Launched) -> str | None:
    """The launch key of an ``up`` cluster (its saved spec), or None if it has none."""
    spec = launched.data.get("spec")
    key = spec.get("launch_key") if isinstance(spec, dict) else None
    return key if isinstance(key, str) else None
