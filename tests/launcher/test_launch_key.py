"""The launch key reaches every node and nowhere else.

One key per launch, made by the launcher (``ClusterSpec.from_config``): in each node's
environment (local: the process env; Slurm: sbatch's environment, the script names it
only; Terraform targets: the 0600 tfvars, sensitive in every module), saved with the
launched state for grow and replacements, and never in a dry run, deploy.json, the
results or the node logs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from syndeo.launcher import spec as spec_module
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import deploy
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.state import save_launched
from syndeo.launcher.targets.slurm.target import SlurmTarget
from syndeo.launcher.targets.terraform import TerraformTarget
from tests.support.launched import make_launched

KEY = "c3" * 32
HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
AWS = ["--instance-type", "c7i.2xlarge", "--region", "us-east-1", "--image", "ami-0abc"]


def _no_cloud_env(home: Path) -> dict[str, str]:
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(home),
        SYNDEO_HOME=str(home / ".syndeo"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "none"),
    )
    return env


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "local", "--nodes", "2"],
        ["--target", "slurm", "--nodes", "2"],
        ["--target", "aws", "--nodes", "2", *AWS],
    ],
    ids=["local", "slurm", "aws"],
)
def test_dry_run_never_shows_a_launch_key(args: list[str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo", "deploy", "--dry-run", "--cluster-id", "lk-dry", *args],
        capture_output=True,
        text=True,
        env=_no_cloud_env(tmp_path),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "SYNDEO_CLUSTER_ID" in proc.stdout or '"cluster_id"' in proc.stdout
    # No key-shaped value anywhere (the plan has no other 64-hex values).
    assert HEX64.findall(proc.stdout + proc.stderr) == []
    if args[1] == "slurm":
        assert 'export SYNDEO_LAUNCH_KEY="${SYNDEO_LAUNCH_KEY}"' in proc.stdout
    if args[1] == "aws":
        assert '"launch_key": "<made per launch, not shown>"' in proc.stdout


def test_every_launch_gets_its_own_key_and_its_nodes_share_it() -> None:
    cfg = load_config(target="local", nodes=3)
    a = ClusterSpec.from_config(cfg, "file:///tmp/r", "lk-a")
    b = ClusterSpec.from_config(cfg, "file:///tmp/r", "lk-a")
    assert a.launch_key and b.launch_key and a.launch_key != b.launch_key
    envs = [a.node_env(r, Path(f"/tmp/lk/{r}")) for r in range(3)]
    assert {e["SYNDEO_LAUNCH_KEY"] for e in envs} == {a.launch_key}
    assert a.launch_key not in repr(a)


def test_the_key_is_saved_with_the_launched_state_owner_only(syndeo_home: Path) -> None:
    spec = ClusterSpec.from_config(load_config(target="local"), "file:///tmp/r", "lk-state")
    # What up's watcher and the targets save for grow and replacements.
    launched = make_launched("local", "lk-state", "file:///tmp/r", 1.0, spec=spec)
    path = save_launched(launched)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = ClusterSpec.model_validate(json.loads(path.read_text())["spec"])
    assert saved.launch_key == spec.launch_key
    assert saved.node_env(5, Path("/tmp/lk/5"))["SYNDEO_LAUNCH_KEY"] == spec.launch_key


@pytest.fixture
def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in sbatch that records its script and the key in its environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch"
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nprintf "%s" "${{SYNDEO_LAUNCH_KEY-unset}}" > "{log}.key"\n'
        f'cat > "{log}.stdin"\necho 4243\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("SYNDEO_LAUNCH_KEY", raising=False)
    return log


def test_slurm_passes_the_key_in_a_private_file_never_in_the_script_or_sbatchs_env(
    fake_sbatch: Path, tmp_path: Path
) -> None:
    """Not in the script, and not in sbatch's environment either: a site may keep a
    job's environment in slurmdbd for good (AccountingStoreFlags=job_env).  The script
    reads it from a 0600 file beside it, removed once the cluster is stopped."""
    cfg = load_config(
        target="slurm", slurm={"job_dir": str(tmp_path / "jobs"), "python": "python3"}
    )
    spec = ClusterSpec.from_config(cfg, (tmp_path / "rdv").as_uri(), "lk-slurm")
    target = SlurmTarget(cfg)
    job = target._job(spec)
    job.job_dir.mkdir(parents=True)
    target._submit(job)
    assert spec.launch_key is not None
    assert fake_sbatch.with_suffix(".key").read_text() == "unset"
    secrets = job.job_dir / "job.sbatch.secrets"
    assert secrets.read_text() == f"SYNDEO_LAUNCH_KEY={spec.launch_key}\n"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    script = fake_sbatch.with_suffix(".stdin").read_text()
    assert spec.launch_key not in script
    assert 'export SYNDEO_LAUNCH_KEY="${SYNDEO_LAUNCH_KEY}"' in script
    assert spec.launch_key not in (job.job_dir / "job.sbatch").read_text()
    assert spec.launch_key not in repr(job)
    # The job's shell reads the file, then turns the reference into the value each node
    # gets (the script's own lines, run by bash).
    head = script[: script.index("# ---- per node")]
    probe = head + 'printf %s "$SYNDEO_LAUNCH_KEY"\n'
    out = subprocess.run(
        ["bash", "-c", probe], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert out.stdout == spec.launch_key, out.stderr
    launched = make_launched(
        "slurm",
        spec.cluster_id,
        spec.rendezvous,
        part={"job_id": "4243", "job_dir": str(job.job_dir), "log": "x"},
    )
    # The job has ended, as the launcher's one batched squeue query reads it.
    (tmp_path / "bin" / "squeue").write_text("#!/bin/sh\necho '4243|COMPLETED|None|0|0|n1|n1'\n")
    (tmp_path / "bin" / "squeue").chmod(0o755)
    target.stop(launched)
    assert not secrets.exists()


def test_terraform_targets_pass_the_key_as_a_variable(tmp_path: Path) -> None:
    cfg = load_config(
        target="aws",
        aws={"instance_type": "c7i.2xlarge", "region": "us-east-1", "image": "ami-0abc"},
    )
    spec = ClusterSpec.from_config(cfg, "s3://syndeo-0123456789ab/syndeo", "lk-tf")
    from syndeo.launcher.targets import get_target

    target = get_target(cfg)
    assert isinstance(target, TerraformTarget)
    assert target.tfvars(spec)["launch_key"] == spec.launch_key
    assert spec.launch_key is not None and spec.launch_key not in target.script(spec)


@pytest.mark.cluster
def test_a_local_cluster_runs_with_the_key_and_leaves_it_nowhere(
    syndeo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path: the head signs, the worker verifies and joins, the run ends;
    the key is in no result file, no deploy.json, no node log."""
    monkeypatch.setattr(spec_module, "new_key", lambda: KEY)
    results = tmp_path / "res"
    cfg = load_config(
        target="local",
        nodes=2,
        cluster_id="lk-local",
        results_dir=results,
        run=f"{sys.executable} -c 'import ray; ray.init(); print(len(ray.nodes()))'",
        join_timeout_s=240,
        workdir=tmp_path,
    )
    outcome = deploy(cfg)
    assert outcome.exit_code == 0, outcome.message
    summary = json.loads((results / "lk-local" / "deploy.json").read_text())
    assert summary["exit_code"] == 0
    written = [p for p in [*results.rglob("*"), *syndeo_home.rglob("*")] if p.is_file()]
    assert any(p.name == "deploy.json" for p in written)
    assert any(p.name.startswith("node-") for p in written)  # the node logs were searched
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert "2" in (results / "lk-local" / "workload.log").read_text()
