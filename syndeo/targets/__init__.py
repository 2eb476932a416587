"""Deployment targets by name, imported lazily (a target may pull in heavy modules)."""

from __future__ import annotations

import importlib
from typing import Any

from syndeo.config import DeployConfig
from syndeo.errors import TargetError
from syndeo.targets.base import ClusterSpec, Launched, Target

# name -> (module, class)
TARGETS: dict[str, tuple[str, str]] = {
    "local": ("syndeo.targets.local", "LocalTarget"),
    "slurm": ("syndeo.targets.slurm", "SlurmTarget"),
    "ssh": ("syndeo.targets.ssh", "SshTarget"),
    "aws": ("syndeo.targets.aws", "AwsTarget"),
    "gcp": ("syndeo.targets.gcp", "GcpTarget"),
    "azure": ("syndeo.targets.azure", "AzureTarget"),
}


def get_target(cfg: DeployConfig, **kwargs: Any) -> Target:
    if cfg.target not in TARGETS:
        raise TargetError(f"unknown target {cfg.target!r}; available: {', '.join(TARGETS)}")
    module_name, class_name = TARGETS[cfg.target]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise TargetError(f"target {cfg.target!r} is not installed in this build") from None
        raise
    cls: type[Target] = getattr(module, class_name)
    return cls(cfg, **kwargs)


__all__ = ["TARGETS", "ClusterSpec", "Launched", "Target", "get_target"]
