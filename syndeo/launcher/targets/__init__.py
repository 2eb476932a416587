"""Deployment targets by name, imported lazily (a target may pull in heavy modules)."""

from __future__ import annotations

import importlib
from typing import Any

from syndeo.core.errors import TargetError
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.targets.base import Target

# name -> (module, class)
TARGETS: dict[str, tuple[str, str]] = {
    "local": ("syndeo.launcher.targets.local", "LocalTarget"),
    "slurm": ("syndeo.launcher.targets.slurm.target", "SlurmTarget"),
    "ssh": ("syndeo.launcher.targets.ssh", "SshTarget"),
    "aws": ("syndeo.launcher.targets.aws", "AwsTarget"),
    "gcp": ("syndeo.launcher.targets.gcp", "GcpTarget"),
    "azure": ("syndeo.launcher.targets.azure", "AzureTarget"),
    "alibaba": ("syndeo.launcher.targets.alibaba", "AlibabaTarget"),
}


def target_class(name: str) -> type[Target]:
    """The class of target ``name`` (its module imported now, not before)."""
    if name not in TARGETS:
        raise TargetError(f"unknown target {name!r}; available: {', '.join(TARGETS)}")
    module_name, class_name = TARGETS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise TargetError(f"target {name!r} is not installed in this build") from None
        raise
    cls: type[Target] = getattr(module, class_name)
    return cls


def get_target(cfg: DeployConfig, **kwargs: Any) -> Target:
    return target_class(cfg.target)(cfg, **kwargs)


__all__ = ["TARGETS", "Target", "get_target", "target_class"]
