"""Node groups: one Ray cluster made of differently shaped nodes (head, CPU, GPU …).

A config without ``[[groups]]`` is one homogeneous group, exactly as before.  With
groups, the rule for the head is: **the head is rank 0 of the first group**, and
unless ``head = "first"`` is set, a 1-node group named ``head`` (shaped by the
top-level ``cpus_per_node`` / ``gpus_per_node`` / ``memory_mb_per_node``) is put
first -- or kept first, if the user wrote one named ``head`` themselves.  Ranks are
numbered through the groups in order, so the rendezvous, the readiness count and
the ``syndeo-rank`` labels work as they do without groups.

Everything here is pure data (no target, no I/O): targets turn a :class:`Layout`
into jobs, processes or Terraform variables (``terraform/modules/node``'s ``groups``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from syndeo.core.option import duration_field

GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
HEAD_GROUP = "head"
# AWS instance families of Arm (Graviton) machines: a1, and a "g" after the generation
# (m7g, c6gn, r8gd, t4g, x2gd, im4gn, is4gen, g5g, hpc7g).
_AWS_ARM = re.compile(r"^(a1|[a-z]+[0-9]+g[a-z]*)\.")
# How long a node that follows demand may run without joining before it is given up: an
# image starts and a node joins in well under a minute on every target.
START_TIMEOUT_S = 600.0
# What a Group takes from its GroupConfig unchanged.
_TAKEN_AS_IS = {
    "queue_timeout_s",
    "start_timeout_s",
    "slurm",
    "ssh",
    "aws",
    "gcp",
    "azure",
    "alibaba",
}


def implied_arch(aws: dict[str, Any]) -> str:
    """The machines' architecture a group's AWS instance type implies (``uname -m``)."""
    return "aarch64" if _AWS_ARM.match(str(aws.get("instance_type", ""))) else "x86_64"


class GroupConfig(BaseModel):
    """One ``[[groups]]`` entry as the user writes it; unset shape fields inherit the top level."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str
    nodes: int = Field(default=1, ge=0, le=4096)  # 0: declared now, filled by `invoke grow`
    cpus_per_node: int | None = Field(default=None, ge=1, le=1024)
    gpus_per_node: int | None = Field(default=None, ge=0, le=64)
    memory_mb_per_node: int | None = Field(default=None, ge=256)
    # The head may start the workload once every group has this many nodes (default:
    # all of them); the rest may join later.  Waited for until join_timeout_s.
    min_nodes: int | None = Field(default=None, ge=0)
    # Set: the group follows demand (syndeo/node/autoscaler.py) between min_nodes
    # (default 0) and this many nodes; it starts at min_nodes, added by the watcher.
    max_nodes: int | None = Field(default=None, ge=1, le=4096)
    # A node of a group that follows demand which has not joined is given up (cancelled,
    # tried again after a backoff) after waiting this long for a machine (a queued Slurm
    # job; None: as long as it takes) or this long once its machine runs.
    queue_timeout_s: float | None = Field(default=None, gt=0)
    start_timeout_s: float = Field(default=START_TIMEOUT_S, gt=0)
    container: Path | None = None  # None = the top-level container
    # The machines' architecture (None: what its AWS instance type implies, else x86_64):
    # a job's wheels are resolved for each architecture the cluster's groups have.
    arch: Literal["x86_64", "aarch64"] | None = None
    # Per-group [slurm] overrides (partition, gres_name, gpu_request, account, qos,
    # time, extra_sbatch); checked by the Slurm target together with the [slurm] section.
    slurm: dict[str, Any] = {}
    # Per-group VM settings, checked by those targets: [groups.ssh] hosts = [...] (the
    # group's machines), [groups.aws|gcp|azure|alibaba] instance_type = "..." (its VM size).
    ssh: dict[str, Any] = {}
    aws: dict[str, Any] = {}
    gcp: dict[str, Any] = {}
    azure: dict[str, Any] = {}
    alibaba: dict[str, Any] = {}

    @field_validator("queue_timeout_s", "start_timeout_s", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return duration_field(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not GROUP_NAME_RE.match(v):
            raise ValueError(f"{v!r}: use 1-31 of a-z, 0-9 and '-', starting with a letter")
        return v


class Group(BaseModel):
    """A group as targets see it: every shape field resolved, its ranks assigned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    first_rank: int = Field(ge=0)
    nodes: int = Field(ge=0)
    cpus: int = Field(ge=1)
    gpus: int = Field(ge=0)
    memory_mb: int | None = None
    min_nodes: int = Field(ge=0)
    # (least, most) nodes when the group follows demand; None: a fixed size.  Such a
    # group has no nodes of its own at launch (nodes = 0): every one of its nodes is
    # added and removed like a `grow`n one, so any of them can be the one let go.
    autoscale: tuple[int, int] | None = None
    queue_timeout_s: float | None = None  # see GroupConfig
    start_timeout_s: float = START_TIMEOUT_S
    container: Path | None = None
    arch: str = "x86_64"
    slurm: dict[str, Any] = {}
    ssh: dict[str, Any] = {}
    aws: dict[str, Any] = {}
    gcp: dict[str, Any] = {}
    azure: dict[str, Any] = {}
    alibaba: dict[str, Any] = {}

    @property
    def ranks(self) -> range:
        return range(self.first_rank, self.first_rank + self.nodes)

    @property
    def holds_head(self) -> bool:
        return self.first_rank == 0 and self.nodes > 0


class Layout(BaseModel):
    """The groups of one cluster, in rank order (rank 0, the head, is in the first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: list[Group]

    @property
    def nodes(self) -> int:
        return sum(g.nodes for g in self.groups)

    def group(self, name: str) -> Group:
        for g in self.groups:
            if g.name == name:
                return g
        known = ", ".join(g.name for g in self.groups)
        raise KeyError(f"unknown group {name!r}; the cluster's groups are: {known}")

    def group_of(self, rank: int) -> Group:
        for g in self.groups:
            if rank in g.ranks:
                return g
        raise KeyError(f"rank {rank} is in no group")

    def autoscaled(self) -> str:
        """``SYNDEO_AUTOSCALE``: ``name:least:most:cpus:gpus:memory_mb`` per group that
        follows demand (memory empty: Ray's), comma-separated; "" if none does."""
        return ",".join(
            f"{g.name}:{g.autoscale[0]}:{g.autoscale[1]}:{g.cpus}:{g.gpus}:{g.memory_mb or ''}"
            for g in self.groups
            if g.autoscale is not None
        )

    def expected(self) -> str:
        """``SYNDEO_GROUPS``: ``name:nodes:min_nodes`` per group, comma-separated."""
        return ",".join(f"{g.name}:{g.nodes}:{g.min_nodes}" for g in self.groups)


def build_layout(
    groups: list[GroupConfig],
    *,
    head: str,
    cpus: int,
    gpus: int,
    memory_mb: int | None,
    container: Path | None,
) -> Layout:
    """Resolve ``[[groups]]`` (already validated one by one) into a :class:`Layout`.

    Raises ValueError with one sentence for cross-group mistakes (duplicate names,
    an empty first group, ``min_nodes`` above ``nodes``).
    """
    seen: set[str] = set()
    for g in groups:
        if g.name in seen:
            raise ValueError(f"group {g.name!r} is defined twice")
        seen.add(g.name)
        _check_bounds(g)
    entries = list(groups)
    if head == "own" and (not entries or entries[0].name != HEAD_GROUP):
        if HEAD_GROUP in seen:
            raise ValueError(
                f"the group {HEAD_GROUP!r} holds the head and must come first "
                '(or set head = "first" to put the head in the first group)'
            )
        entries.insert(0, GroupConfig(name=HEAD_GROUP, nodes=1))
    if entries[0].max_nodes is not None:
        raise ValueError(
            f"group {entries[0].name!r} holds the head and cannot follow demand; give the "
            "nodes that come and go a group of their own"
        )
    if entries[0].nodes < 1:
        raise ValueError(f"group {entries[0].name!r} holds the head (rank 0): it needs nodes >= 1")
    out, rank = [], 0
    for g in entries:
        scale = None if g.max_nodes is None else (g.min_nodes or 0, g.max_nodes)
        out.append(
            Group(
                name=g.name,
                first_rank=rank,
                nodes=0 if scale else g.nodes,
                cpus=g.cpus_per_node if g.cpus_per_node is not None else cpus,
                gpus=g.gpus_per_node if g.gpus_per_node is not None else gpus,
                memory_mb=g.memory_mb_per_node if g.memory_mb_per_node is not None else memory_mb,
                min_nodes=0 if scale else (g.min_nodes if g.min_nodes is not None else g.nodes),
                autoscale=scale,
                container=g.container if g.container is not None else container,
                arch=g.arch or implied_arch(g.aws),
                **g.model_dump(include=_TAKEN_AS_IS),  # copies of the per-target dicts
            )
        )
        rank += out[-1].nodes
    return Layout(groups=out)


def _check_bounds(g: GroupConfig) -> None:
    """One group's counts: min_nodes within nodes, or within max_nodes for a group that
    follows demand (which starts at min_nodes, so it takes no ``nodes``)."""
    if g.max_nodes is None:
        if g.min_nodes is not None and g.min_nodes > g.nodes:
            raise ValueError(
                f"group {g.name!r}: min_nodes {g.min_nodes} is more than its {g.nodes} nodes"
            )
        return
    if "nodes" in g.model_fields_set:
        raise ValueError(
            f"group {g.name!r} follows demand (max_nodes) and starts at min_nodes: leave nodes out"
        )
    if (g.min_nodes or 0) > g.max_nodes:
        raise ValueError(
            f"group {g.name!r}: min_nodes {g.min_nodes} is more than max_nodes {g.max_nodes}"
        )


def parse_autoscaled(text: str) -> dict[str, tuple[int, int, int, int, int | None]]:
    """``SYNDEO_AUTOSCALE`` back into {name: (least, most, cpus, gpus, memory_mb)}."""
    out: dict[str, tuple[int, int, int, int, int | None]] = {}
    for part in filter(None, text.split(",")):
        f = part.split(":")
        if len(f) != 6 or not GROUP_NAME_RE.match(f[0]):
            raise ValueError(f"{part!r} is not name:min:max:cpus:gpus:memory_mb")
        least, most, cpus, gpus = (int(x) for x in f[1:5])
        if not 0 <= least <= most or cpus < 1 or gpus < 0:
            raise ValueError(f"{part!r}: need 0 <= min <= max, cpus >= 1, gpus >= 0")
        out[f[0]] = (least, most, cpus, gpus, int(f[5]) if f[5] else None)
    return out


def parse_expected(text: str) -> dict[str, tuple[int, int]]:
    """``SYNDEO_GROUPS`` back into {name: (nodes, min_nodes)} (see :meth:`Layout.expected`)."""
    out: dict[str, tuple[int, int]] = {}
    for part in filter(None, text.split(",")):
        fields = part.split(":")
        if len(fields) != 3 or not GROUP_NAME_RE.match(fields[0]):
            raise ValueError(f"{part!r} is not name:nodes:min_nodes")
        name, nodes, least = fields[0], int(fields[1]), int(fields[2])
        if nodes < 0 or not 0 <= least <= nodes:
            raise ValueError(f"{part!r}: need 0 <= min_nodes <= nodes")
        out[name] = (nodes, least)
    return out
