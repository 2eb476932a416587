"""A Terraform-backed target on a module of the test's own: launch, poll and destroy run
the real terraform binary, with no cloud and no config."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.terraform import TerraformTarget


class ModuleTarget(TerraformTarget):
    name = "fake"
    module = "ssh"

    def __init__(self, module_dir: Path, tfvars: dict[str, Any] | None = None) -> None:
        self._rdv = None
        self._node_creds = None
        self.echo = None
        self.module_dir = module_dir
        self._vars = tfvars or {}

    def machine_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        return {}

    def default_rendezvous(self) -> str:
        return ""

    def tfvars(self, spec: ClusterSpec) -> dict[str, Any]:
        return self._vars


def one_node_spec(cluster_id: str, rendezvous: str, **over: Any) -> ClusterSpec:
    """A one-node launch of :class:`ModuleTarget` (``over`` replaces any field)."""
    fields: dict[str, Any] = dict(
        target="fake",
        cluster_id=cluster_id,
        rendezvous=rendezvous,
        nodes=1,
        cpus=1,
        gpus=0,
        memory_mb=None,
        object_store_mb=None,
        join_timeout=60,
        run="true",
        workdir=None,
        image=None,
        not_before=time.time(),
    )
    return ClusterSpec(**{**fields, **over})
