"""A node with a real GPU: its own job (``scripts/test-gpu``), for a machine with an NVIDIA
GPU and driver.  Everywhere else the suite leaves it out and its summary says so; run
anyway without a GPU, it fails in one line instead of passing on stand-ins.

A one-node local cluster with ``--gpus-per-node 1``: Ray counts the GPU, a task that
asks for it gets a device in ``CUDA_VISIBLE_DEVICES`` and ``nvidia-smi`` answers there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import assert_nothing_left, reap

pytestmark = pytest.mark.gpu

PROBE = """
import json, os, subprocess, ray
ray.init()
@ray.remote(num_gpus=1)
def on_gpu():
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return os.environ.get("CUDA_VISIBLE_DEVICES"), ray.get_gpu_ids(), smi.returncode, smi.stdout
out = {"gpus": ray.cluster_resources().get("GPU", 0), "task": ray.get(on_gpu.remote())}
with open(os.environ["SYNDEO_RESULT_PATH"], "w") as fh:
    json.dump(out, fh)
"""


def test_a_gpu_node_gives_its_gpu_to_a_task(tmp_path: Path, syndeo_home: Path) -> None:
    smi = shutil.which("nvidia-smi")
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True) if smi else None
    assert listed is not None and listed.returncode == 0 and "GPU" in listed.stdout, (
        "no NVIDIA GPU here (nvidia-smi -L lists none): this job needs one"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    cid = "tgpu"
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "syndeo",
                "deploy",
                "--target",
                "local",
                "--nodes",
                "1",
                "--gpus-per-node",
                "1",
                "--cluster-id",
                cid,
                "--results-dir",
                str(tmp_path / "r"),
                "--run",
                f"python {probe}",
            ],
            cwd=tmp_path,  # the program's own dir (never the checkout: tasks may write it)
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads((tmp_path / "r" / cid / "result.json").read_text())
        visible, ids, smi_rc, smi_out = out["task"]
        assert out["gpus"] == 1 and len(ids) == 1, out
        assert visible is not None and visible.split(",")[0] != "", out
        assert smi_rc == 0 and "GPU" in smi_out, out
        assert_nothing_left(cid)
    finally:
        reap(cid)
