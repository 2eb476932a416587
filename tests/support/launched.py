"""Saved cluster state for tests that need one without launching: the fields a test
names, on top of the least each target's part must hold."""

from __future__ import annotations

from typing import Any

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec, Launched

# What a target's part cannot be without (paths that exist nowhere: nothing reads them
# unless the test names its own).
_LEAST: dict[str, dict[str, Any]] = {
    "local": {},
    "slurm": {"job_id": "1", "job_dir": "/nonexistent/job", "log": "/nonexistent/job/log"},
}
_TERRAFORM = {
    "module_dir": "/nonexistent/module",
    "workspace": "/nonexistent/ws",
    "join_timeout": 60,
}


def make_launched(
    target: str,
    cluster_id: str,
    rendezvous: str,
    started_at: float = 0.0,
    part: dict[str, Any] | None = None,
    **common: Any,
) -> Launched:
    """A :class:`Launched` of ``target``: ``common`` its shared fields, ``part`` its own."""
    least = _LEAST.get(target, _TERRAFORM)
    return Launched.model_validate(
        {
            "target": target,
            "cluster_id": cluster_id,
            "rendezvous": rendezvous,
            "started_at": started_at,
            **common,
            "part": {"target": target, **least, **(part or {})},
        }
    )


def spec_for(
    target: str, cluster_id: str, rendezvous: str, launch_key: str | None = None, **fields: Any
) -> ClusterSpec:
    """A spec as ``up`` saves it (the local target's defaults, then ``fields``)."""
    spec = ClusterSpec.from_config(load_config(target="local"), rendezvous, cluster_id)
    update: dict[str, Any] = {"target": target, "workdir": None, **fields}
    if launch_key is not None:
        update["launch_key"] = launch_key
    return spec.model_copy(update=update)


__all__ = ["make_launched", "spec_for"]
