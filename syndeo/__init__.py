"""Syndeo: one Ray workload, unchanged, on a laptop, a Slurm allocation or cloud VMs.

The Python API (:mod:`syndeo.api`): ``syndeo.up``, ``syndeo.deploy``, ``syndeo.plan``,
``syndeo.Cluster``, ``syndeo.Job``, ``syndeo.JobState``, ``syndeo.JobResult`` and
``syndeo.SyndeoError``.  Every target ends in the same per-node command (``syndeo node``)
configured only by environment variables; see :mod:`syndeo.node.main`.  Importing this
package imports no cloud SDK and not Ray, nor the launcher: the API loads on first use.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from syndeo.core.errors import SyndeoError

if TYPE_CHECKING:
    from syndeo.api import Cluster, Job, JobResult, JobState, deploy, plan, up

# The version is written once, in pyproject.toml; an installed syndeo (a wheel, an editable
# install, the image's) carries it in its metadata.
try:
    __version__ = _metadata.version("syndeo")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
__all__ = [
    "Cluster",
    "Job",
    "JobResult",
    "JobState",
    "SyndeoError",
    "__version__",
    "deploy",
    "plan",
    "up",
]
_API = {"Cluster", "Job", "JobResult", "JobState", "deploy", "plan", "up"}


def __getattr__(name: str) -> Any:
    """The API's names, imported when first asked for (``import syndeo`` stays light)."""
    if name in _API:
        from syndeo import api

        return getattr(api, name)
    raise AttributeError(f"module 'syndeo' has no attribute {name!r}")
