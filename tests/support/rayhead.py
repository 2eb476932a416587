"""A real Ray head started as the node runtime starts one for a cluster that follows
demand (``--autoscaling-config``: Ray's own monitor runs Syndeo's provider), with a head
of no CPU, so that work waits for a group's node; no watcher runs, so nothing asked for
ever comes and the request stays in the provider's file."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from syndeo.core import launchkey
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.autoscale import want_path
from syndeo.node.raynode import RayProcess


@contextmanager
def autoscaling_head(cluster_id: str, autoscale: str, rendezvous: Path) -> Iterator[RayProcess]:
    """The head of ``cluster_id`` whose groups ``autoscale`` gives (SYNDEO_AUTOSCALE's form)."""
    scratch = Path(tempfile.mkdtemp(prefix="syhead-"))  # short: Ray's socket paths
    settings = NodeSettings(
        cluster_id=cluster_id,
        rank=0,
        nodes=1,
        cpus=0,  # work waits for a group's node
        rendezvous=rendezvous.as_uri(),
        scratch=scratch,
        workdir=rendezvous.parent / "work",
        launch_key=launchkey.new_key(),
        autoscale=autoscale,
        idle_timeout_s=600,
    )
    token = scratch / "token"
    token.write_text(f"{cluster_id}-test-token")
    token.chmod(0o600)
    ray = RayProcess(settings, token, None)
    try:
        ray.start()
        yield ray
    finally:
        ray.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def want(head: RayProcess) -> dict[str, int]:
    """The nodes per group the provider asks for now ({} before its first request)."""
    try:
        return dict(json.loads(want_path(head.settings.scratch).read_text())["want"])
    except (OSError, ValueError, KeyError):
        return {}


def until(what: str, probe: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.5)
