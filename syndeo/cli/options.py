"""Options, and the groups of them the verbs share (the verbs: :mod:`syndeo.cli.commands`).

An option that is a setting (a :class:`~syndeo.launcher.config.DeployConfig` or
``[bench]`` field) is made from that field -- its help, type and name are declared there,
once, beside its default and bounds; the rest are the verbs' own arguments and the target
sections' machine options (``--instance-type``: ``vm_instance_type``, the chosen cloud's
``instance_type``).  An option has one name on both command lines, whatever the keyword
it becomes.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from syndeo.core.nodeconfig import ClusterOptions
from syndeo.core.option import parse_duration
from syndeo.launcher.config import BenchSettings, DeployConfig


@dataclass(frozen=True)
class Option:
    keyword: str  # what the verb takes: a DeployConfig field or the verb's own argument
    help: str
    type: Callable[[str], Any] | None = None  # None: text
    switch: bool = False  # --x turns it on
    negatable: bool = False  # --x / --no-x
    repeat: bool = False  # a list: syndeo repeats the option; invoke, see `split`
    split: bool = True  # invoke: one comma-separated value (False: repeat it, as syndeo)
    name: str | None = None  # on the command line, where it differs from the keyword
    required: bool = False
    default: Any = None

    @property
    def cli(self) -> str:
        """The option's name on both command lines, as a Python identifier."""
        return self.name or self.keyword

    @property
    def flag(self) -> str:
        return "--" + self.cli.replace("_", "-")


def _types(annotation: Any) -> set[Any]:
    """The members of an ``X | Y`` annotation; any other annotation alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set(typing.get_args(annotation))
    return {annotation}


def _duration(text: str) -> float:
    """A duration option's seconds; argparse says a bad one in our words, in one line."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def from_settings(model: type[BaseModel], *names: str, prefix: str = "") -> list[Option]:
    """The options of ``model``'s fields ``names``, as :func:`config.option` declared them
    (``prefix``: the keyword a section's field goes by, e.g. ``bench_`` for ``[bench]``)."""
    made = []
    for name in names:
        field = model.model_fields[name]
        extra = field.json_schema_extra
        assert isinstance(extra, dict) and field.description, f"{name}: not declared an option"
        kinds = _types(field.annotation) - {type(None)}
        kind: Any = next((t for t in (int, float, Path) if t in kinds), None)
        if extra.get("duration"):
            kind = _duration  # 300, 30s, 5m, 2h
        flag = str(extra["flag"])
        made.append(
            Option(
                prefix + name,
                field.description,
                None if flag else kind,
                switch=flag == "switch",
                negatable=flag == "negatable",
                repeat=list in {typing.get_origin(t) for t in kinds},
                # On the command line a section's field keeps its own name (--repeats).
                name=str(extra["option"]) or (name if prefix else None),
            )
        )
    return made


CONFIG = Option("config", "TOML file with settings; options override it")
# down, grow, jobs, …: a cluster `up` started
CLUSTER_ID = Option("cluster_id", "the cluster's id (default: the only one up)")
# The settings every node shares that only `up` takes (autostop, with its grace on the
# clouds): options of up and check, not of deploy.
UP_ONLY = ("autostop_s", "autostop_grace_s", "autostop_wait_for")
CLUSTER = [
    *from_settings(
        DeployConfig,
        "target",
        "nodes",
        "cpus_per_node",
        "gpus_per_node",
        "memory_mb_per_node",
        "object_store_mb_per_node",
        "cluster_id",
        "rendezvous",
        "join_timeout_s",
        "container",
        "workdir",
    ),
    Option(
        "ssh_hosts",
        "ssh: comma-separated hosts, one node each (the first is the head)",
        name="hosts",
    ),
    Option("ssh_user", "ssh: login on every host (default: you)"),
    Option("ssh_key", "ssh: private key file (default: the ssh agent)"),
    Option(
        "vm_instance_type", "aws/gcp/azure/alibaba: VM type, e.g. c7i.2xlarge", name="instance_type"
    ),
    Option("vm_region", "aws/gcp/azure/alibaba: region (azure: location)", name="region"),
    Option(
        "vm_image",
        "aws/gcp/azure/alibaba: the Packer-baked VM image (AMI, GCP, Azure or ECS image id)",
        name="image",
    ),
    Option("vm_spot", "aws/gcp/azure/alibaba: spot or preemptible VMs", switch=True, name="spot"),
    *from_settings(
        DeployConfig, *(f for f in ClusterOptions.model_fields if f not in UP_ONLY), "tls"
    ),
]
RUN = [
    *from_settings(DeployConfig, "run", "results_dir", "exclude", "requirements"),
    *from_settings(BenchSettings, "envs", "mode", "repeats", "samples_per_cpu", prefix="bench_"),
]
# A cluster that follows demand and stops itself (syndeo/launcher/autoscale.py).
UP = from_settings(DeployConfig, "min_nodes", "max_nodes", *UP_ONLY)
GROUP = Option("group", "the node group (its name in the config's [[groups]])", required=True)
JOB = Option("job", "the job id submit printed (see: syndeo jobs)", required=True)
FOLLOW = Option("follow", "keep showing the output until the job ends", switch=True, default=False)
