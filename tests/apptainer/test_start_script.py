"""The VM start script (terraform/modules/node/files/syndeo-node) under the real Apptainer,
with the built image, as the unprivileged user: what ``syndeo node`` sees inside.

The script runs as systemd (or the ssh target) runs it: ``syndeo-node ENV_FILE``, with
a node environment file as terraform/modules/node renders it.  Its own ``apptainer
exec`` line runs unchanged -- flags, binds, forwarded variables, the GPU rule -- through
the real apptainer; only the container's command, ``syndeo node``, is swapped for a
probe that reports the environment, identity, network namespace, devices and scratch
dir it finds (a shim first on PATH hands every other argument on as it came).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testbeds.users import as_user

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "terraform/modules/node/files/syndeo-node"
PROBE = """
import json, os, pathlib
from syndeo.core.nodeconfig import load_env_fd
load_env_fd()  # as `syndeo node` does first: the node's variables come on a pipe
scratch = pathlib.Path(os.environ["SYNDEO_SCRATCH"])
(scratch / "written-inside").write_text("x")
print("PROBE " + json.dumps({
    "env": dict(os.environ), "uid": os.getuid(), "net": os.readlink("/proc/self/ns/net"),
    "dev": sorted(os.listdir("/dev")),
}))
"""
# The real apptainer with the script's arguments, its last two (`syndeo node`) replaced.
SHIM = """#!/bin/bash
args=("$@")
n=${#args[@]}
[[ ${args[n-2]} == syndeo && ${args[n-1]} == node ]] || { echo "shim: $*" >&2; exit 9; }
printf 'ARGV %s\\n' "${args[@]:0:n-2}" >&2
exec APPTAINER "${args[@]:0:n-2}" python3 -c "$PROBE_CODE"
"""


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_start_script_runs_the_node_in_the_image_with_only_its_environment(
    sif: Path, shared_dir: Path, run_user: str | None, run_uid: int, gpus: int
) -> None:
    real = shutil.which("apptainer")
    assert real, "apptainer missing: run scripts/setup --all"
    bindir = shared_dir / "bin"
    bindir.mkdir()
    (bindir / "apptainer").write_text(SHIM.replace("APPTAINER", real))
    (bindir / "apptainer").chmod(0o755)
    scratch = shared_dir / "scratch" / "0"
    node_env = {
        "SYNDEO_CLUSTER_ID": "start-probe",
        "SYNDEO_RANK": "0",
        "SYNDEO_NODES": "1",
        "SYNDEO_RENDEZVOUS": "s3://bucket/team",
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_SCRATCH_BASE": str(shared_dir),
        "SYNDEO_IMAGE": str(sif),
        "SYNDEO_GPUS": str(gpus),
        "SYNDEO_CPUS": "1",
        # The module forwards what the store needs by name, nothing else of the host.
        "SYNDEO_FORWARD_ENV": "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL_S3": "http://10.42.0.1:9000",
        "CUDA_VISIBLE_DEVICES": "0",  # the device a GPU node was given
    }
    env_file = shared_dir / "node.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in node_env.items()))
    for path in (bindir, bindir / "apptainer", env_file):
        os.chown(path, run_uid, -1)
    host = {
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "PROBE_CODE": PROBE,  # the shim's (not the node's: no SYNDEO_ prefix)
        "SYNDEO_TEST_MARK": "forwarded",
        "HOST_ONLY_SECRET": "must-not-leak",
        "AWS_SECRET_ACCESS_KEY": "not-forwarded",
    }
    assert run_user, "runs as root, the container as the unprivileged CI user"
    out = subprocess.run(
        as_user(["bash", str(SCRIPT), str(env_file)], host),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith("PROBE ")]
    seen = json.loads(line.removeprefix("PROBE "))
    argv = [ln.removeprefix("ARGV ") for ln in out.stderr.splitlines() if ln.startswith("ARGV ")]
    inside = seen["env"]

    # Its identity, and nothing of the host's environment but what the node module named.
    assert seen["uid"] == run_uid
    for key, value in node_env.items():
        if key.startswith("SYNDEO_") or key == "AWS_ENDPOINT_URL_S3":
            assert inside.get(key) == value, key
    assert "HOST_ONLY_SECRET" not in inside and "AWS_SECRET_ACCESS_KEY" not in inside
    assert inside.get("SYNDEO_TEST_MARK") == "forwarded"  # SYNDEO_*: its own prefix
    # On the pipe, never in the container's environment (Apptainer's PID 1 keeps that).
    assert inside.get("SYNDEO_ENV_FD") is None and "PROBE_CODE" not in inside
    # The GPU rule: a GPU node gets the driver (--nv) and the devices it was given.
    assert ("--nv" in argv) == (gpus > 0), argv
    assert inside.get("CUDA_VISIBLE_DEVICES") == ("0" if gpus else None)
    assert not [d for d in seen["dev"] if d.startswith("nvidia")]  # no GPU on this machine
    # The host's network (the instance's own IMDS and address), not a namespace of its own.
    host_net = subprocess.run(
        as_user(["readlink", "/proc/self/ns/net"], {"PATH": "/usr/bin:/bin"}),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert seen["net"] == host_net
    # The scratch dir is bound at the same path, private, and written through.
    assert (scratch / "written-inside").read_text() == "x"
    assert scratch.stat().st_mode & 0o777 == 0o700
