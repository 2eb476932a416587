"""Where and with what a result was measured, so results from different targets compare."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from syndeo.bench.models import Manifest

_PACKAGES = ("ray", "gymnasium", "mujoco", "numpy", "syndeo")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def git_commit() -> str | None:
    """Commit of the syndeo checkout, if it is one (inside an image it usually is not)."""
    repo = Path(__file__).resolve().parents[2]
    # An installed syndeo's parent is site-packages, perhaps inside some other project's
    # repository: only a syndeo source tree has its commit.
    if not (repo / "pyproject.toml").is_file() or not (repo / "syndeo").is_dir():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def build(cluster_nodes: int, cluster_cpus: int, started_at: str) -> Manifest:
    return Manifest(
        target=os.environ.get("SYNDEO_TARGET", "standalone"),
        cluster_nodes=cluster_nodes,
        cluster_cpus=cluster_cpus,
        cpu_model=cpu_model(),
        hostname=socket.gethostname(),
        versions=versions(),
        image_digest=os.environ.get("SYNDEO_IMAGE_DIGEST") or None,
        git_commit=git_commit(),
        started_at=started_at,
        load_avg_1m=[load_avg()],
    )


def load_avg() -> float:
    """A busy host explains a slow run: recorded so results can be judged later."""
    return round(os.getloadavg()[0], 2)
