"""The workload's extra packages on this node: the wheels the launcher resolved
(syndeo/launcher/wheelhouse.py) fetched from the rendezvous by their sha256, checked,
and installed with pip from those files alone (no index: compute nodes seldom reach
one) into a directory below the node's scratch, before Ray starts.  Ray's processes and
the workload find them through PYTHONPATH, ahead of nothing the image has: the launcher
left out every package the image pins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from syndeo.core.archive import safe_extract
from syndeo.core.errors import NodeError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node.workdir import await_blob
from syndeo.rendezvous import Rendezvous
from syndeo.rendezvous.base import MAX_WHEELHOUSE

PIP_TIMEOUT_S = 900.0


def install(rdv: Rendezvous, s: NodeSettings) -> dict[str, str]:
    """Install the wheels of ``SYNDEO_WHEELHOUSE_DIGEST``; the variables that make Ray's
    processes and the workload import them."""
    assert s.wheelhouse_digest is not None
    what = "the workload's wheels"
    data = await_blob(rdv.get_wheelhouse, s.wheelhouse_digest, s, what, rdv.poller)
    if data is None:
        raise NodeError("the workload's wheels in the rendezvous do not match their digest")
    target = s.scratch / "pylib"
    with tempfile.TemporaryDirectory(dir=s.scratch, prefix="wheels-") as tmp:
        try:
            safe_extract(data, Path(tmp), 2 * MAX_WHEELHOUSE)
        except (ValueError, tarfile.TarError) as exc:
            raise NodeError(f"the workload's wheels cannot be unpacked: {exc}") from None
        wheels = sorted(str(p) for p in Path(tmp).glob("*.whl"))
        argv = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps"]
        argv += ["--disable-pip-version-check", "--no-warn-script-location", "--quiet"]
        argv += ["--target", str(target), *wheels]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise NodeError(
                f"installing the workload's wheels took over {PIP_TIMEOUT_S:.0f} s"
            ) from None
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["pip failed"]
        raise NodeError(f"cannot install the workload's wheels on this node: {last[0]}")
    path = [str(target), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}
