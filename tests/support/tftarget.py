"""A Terraform-backed target on a module of the test's own: launch, poll and destroy run
the real terraform binary, with no cloud and no config."""

from __future__ import annotations

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
