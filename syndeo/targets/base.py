"""What a deployment target is: how machines appear and how node variables get set.

A target implements the same verbs everywhere -- ``script`` (dry run), ``launch``,
``poll``, ``stop`` -- plus ``default_rendezvous``.  It never starts Ray itself:
each machine it provides runs ``syndeo node`` with :meth:`ClusterSpec.node_env`.
``tests/test_targets.py`` checks that every target module keeps this shape.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from syndeo.config import DeployConfig
from syndeo.errors import ConfigError, TargetError
from syndeo.groups import Group, Layout
from syndeo.nodeconfig import NodeSettings


def new_cluster_id(target: str) -> str:
    return f"{target[:5]}-{secrets.token_hex(4)}"


# Below this (sticky, world-writable) directory every level of a scratch path is
# checked by syndeo.securedir.secure_dir: the path is predictable.
SCRATCH_BASE = Path("/tmp")


def short_scratch(spec: ClusterSpec, rank: int | str) -> Path:
    """A scratch dir short enough for Ray's Unix sockets, unique per user, cluster and rank.

    Keyed by rendezvous *and* cluster id: two launchers that happen to reuse an id
    with different rendezvous locations must still not share Ray temp dirs.
    """
    key = zlib.crc32(f"{spec.rendezvous}|{spec.cluster_id}".encode())
    return SCRATCH_BASE / f"syndeo-{os.getuid()}" / f"{key:08x}" / str(rank)


@functools.cache
def _digest(image: Path | None) -> str | None:
    if image is None:
        return None
    from syndeo.image import image_digest  # only when an image is used

    return image_digest(image)


class ClusterSpec(BaseModel):
    """Everything about one cluster that does not depend on which machine a node is."""

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
    image: Path | None
    image_digest: str | None = None
    not_before: float
    dashboard: bool = False
    layout: Layout | None = None  # node groups; None = every node shaped as above

    def group_of(self, rank: int) -> Group | None:
        """The group of ``rank`` (ranks past the layout, added by grow, must name theirs)."""
        return None if self.layout is None else self.layout.group_of(rank)

    def image_for(self, group: Group | None) -> Path | None:
        return self.image if group is None else group.container

    @classmethod
    def from_config(cls, cfg: DeployConfig, rendezvous: str, cluster_id: str) -> ClusterSpec:
        return cls(
            target=cfg.target, cluster_id=cluster_id, rendezvous=rendezvous, nodes=cfg.nodes,
            cpus=cfg.cpus_per_node, gpus=cfg.gpus_per_node, memory_mb=cfg.memory_mb_per_node,
            object_store_mb=cfg.object_store_mb_per_node, join_timeout=cfg.join_timeout_s,
            run=cfg.workload_command(), workdir=(cfg.workdir or Path.cwd()).resolve(),
            image=cfg.container, image_digest=_digest(cfg.container), not_before=time.time(),
            layout=cfg.layout, dashboard=cfg.dashboard,
        )  # fmt: skip

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
            **self.node_settings(rank, scratch, node_ip, group).to_env(),
        }

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
            cluster_id=self.cluster_id, rank=rank, nodes=self.nodes, rendezvous=self.rendezvous,
            scratch=scratch, cpus=cpus, gpus=gpus, memory_mb=memory_mb,
            object_store_mb=self.object_store_mb, node_ip=node_ip, join_timeout=self.join_timeout,
            run=self.run if rank == 0 else "", workdir=self.workdir, target=self.target,
            not_before=self.not_before, image_digest=digest, dashboard=self.dashboard and rank == 0,
            group=group.name if group is not None else None,
            groups=self.layout.expected() if self.layout is not None else None,
        )  # fmt: skip


class Launched(BaseModel):
    """A running cluster as its target knows it; saved to disk by ``up`` for ``down``."""

    target: str
    cluster_id: str
    rendezvous: str
    started_at: float
    data: dict[str, Any] = {}


class Target(ABC):
    name: ClassVar[str]

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.echo = echo  # where the head's output goes when a target can stream it

    @abstractmethod
    def default_rendezvous(self) -> str:
        """Where nodes meet when the user names no rendezvous."""

    def check(self, spec: ClusterSpec) -> None:
        """Every local check of ``spec`` against this target's settings (one line each),
        run before the rendezvous is touched or anything is written."""
        return None  # the config's own rules were all there is to check

    @abstractmethod
    def script(self, spec: ClusterSpec) -> str:
        """What ``launch`` would start, as a script a person can read (``--dry-run``)."""

    @abstractmethod
    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        """Make machines appear, each running ``syndeo node`` with its settings."""

    @abstractmethod
    def poll(self, launched: Launched) -> int | None:
        """The cluster's exit status once its head has ended, else None."""

    @abstractmethod
    def stop(self, launched: Launched) -> None:
        """Stop every process/machine of this cluster (idempotent, only ours)."""

    def wait(self, launched: Launched, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, returning early if the target can see the head end."""
        time.sleep(timeout_s)

    def describe(self, launched: Launched) -> str:
        """Where to find logs etc.; shown when something fails."""
        return ""

    def summary(self, launched: Launched) -> dict[str, Any]:
        """What deploy.json records about the machines beyond the common fields."""
        return {}

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        """Add ``nodes`` nodes of ``group`` that join the running head; what was started.

        ``hosts``: the machines for them, for targets that cannot find their own (ssh);
        ``grow`` refuses it for the others."""
        raise TargetError(
            f"the {self.name} target cannot grow a running cluster (local, slurm and ssh can)"
        )

    def shrink(self, launched: Launched, group: str, nodes: int | None = None) -> list[str]:
        """Remove nodes of ``group`` (not the head) from the running cluster; what was stopped."""
        raise TargetError(
            f"the {self.name} target cannot shrink a running cluster (local, slurm and ssh can)"
        )

    def creates_rendezvous(self, uri: str) -> bool:
        """True if ``launch`` creates the rendezvous location itself (a cloud bucket):
        then it can be checked only once the machines exist."""
        return False


def saved_group(launched: Launched, group: str) -> tuple[ClusterSpec, Group]:
    """The spec an `up` saved and one of its groups, for grow/shrink (one line if unknown)."""
    if "spec" not in launched.data:
        raise ConfigError(
            f"cluster {launched.cluster_id} has no node groups: grow/shrink work on "
            "clusters started with [[groups]]"
        )
    spec = ClusterSpec.model_validate(launched.data["spec"])
    assert spec.layout is not None
    try:
        return spec, spec.layout.group(group)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None
