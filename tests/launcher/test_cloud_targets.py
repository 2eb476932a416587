"""aws / gcp / azure targets on this machine: what can run without a cloud.

``--dry-run`` prints the tfvars and the terraform commands and needs no credentials;
bad or missing settings and missing credentials give one line and exit 2 before
anything is created (no cluster dir, no Terraform state).  Applying the modules
against a real cloud is not possible here (docs/targets/cloud.md: verified only against
a real cloud).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MACHINE = {
    "aws": ["--instance-type", "c7i.2xlarge", "--region", "us-east-1", "--image", "ami-0abc"],
    "gcp": [
        "--instance-type",
        "c3-standard-8",
        "--region",
        "us-central1",
        "--image",
        "projects/p/global/images/syndeo",
    ],
    "azure": [
        "--instance-type",
        "Standard_D8s_v5",
        "--region",
        "westeurope",
        "--image",
        "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/syndeo",
    ],
    "alibaba": [
        "--instance-type",
        "ecs.g7.2xlarge",
        "--region",
        "cn-hangzhou",
        "--image",
        "m-bp1g7004ksh0oeuc1234",
    ],
}
SCHEME = {"aws": "s3", "gcp": "gs", "azure": "az", "alibaba": "oss"}


def _env(home: Path) -> dict[str, str]:
    """A machine with no cloud login at all."""
    drop = ("AWS_", "GOOGLE_", "AZURE_", "ARM_", "CLOUDSDK_", "STORAGE_EMULATOR")
    drop += ("ALIBABA_", "ALICLOUD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(home),
        SYNDEO_HOME=str(home / ".syndeo"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "none"),
        NO_GCE_CHECK="True",
        GCE_METADATA_HOST="127.0.0.1:9",
    )
    return env


def _syndeo(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syndeo", "deploy", *args],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=home,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("cloud", sorted(MACHINE))
def test_dry_run_needs_no_credentials(cloud: str, tmp_path: Path) -> None:
    extra = ["--config", str(_gcp_project(tmp_path))] if cloud == "gcp" else []
    out = _syndeo(
        tmp_path, "--target", cloud, "--nodes", "4", "--spot", "--dry-run", *MACHINE[cloud], *extra
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    tfvars = json.loads("\n".join(ln[4:] for ln in lines if ln.startswith("#   ")))
    assert tfvars["node"]["node_count"] == 4 and tfvars["spot"] is True
    assert tfvars["instance_type"] == MACHINE[cloud][1]
    assert tfvars["create_bucket"] is True
    assert tfvars["node"]["rendezvous"] == f"{SCHEME[cloud]}://{tfvars['bucket_name']}/syndeo"
    assert tfvars["bucket_name"].startswith("syndeo-")  # what the deployer policy allows
    assert any(" init " in ln and "-backend=false" in ln for ln in lines)
    assert any(" apply " in ln and "-auto-approve" in ln for ln in lines)
    assert any(ln.startswith("# teardown:") and " destroy " in ln for ln in lines)
    assert not (tmp_path / ".syndeo").exists(), "a dry run wrote files"


def _gcp_project(tmp_path: Path) -> Path:
    cfg = tmp_path / "gcp.toml"
    cfg.write_text('[gcp]\nproject = "my-project"\n')
    return cfg


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--target", "aws", "--region", "us-east-1"], "--instance-type or [aws] instance_type"),
        (
            ["--target", "aws", *MACHINE["aws"], "--rendezvous", "gs://b/p"],
            "the aws target meets in s3:// buckets",
        ),
        (
            ["--target", "aws", *MACHINE["aws"], "--container", "x.sif"],
            "nodes run the SIF baked into the VM image",
        ),
        (
            ["--target", "local", "--instance-type", "c7i.large"],
            "--instance-type applies to --target aws|gcp|azure|alibaba, not local",
        ),
        (["--target", "gcp", *MACHINE["gcp"]], "gcp: name the project"),
        (["--target", "aws", *MACHINE["aws"], "--nodes", "0"], "nodes:"),
    ],
)
def test_bad_settings_one_line_before_anything(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    out = _syndeo(tmp_path, *args, "--dry-run")
    assert out.returncode == 2, out
    assert expected in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / ".syndeo" / "clusters").exists()


def test_the_removed_record_expiry_setting_is_named_with_what_to_do(tmp_path: Path) -> None:
    # It expired a running cluster's head record after N days (tests/iac/test_bucket_records.py).
    cfg = tmp_path / "aws.toml"
    cfg.write_text("[aws]\nrecord_expiry_days = 14\n")
    out = _syndeo(tmp_path, "--target", "aws", *MACHINE["aws"], "--config", str(cfg), "--dry-run")
    assert out.returncode == 2, out
    [line] = out.stderr.strip().splitlines()
    assert "aws.record_expiry_days is no longer a setting" in line and "delete the line" in line
    assert not (tmp_path / ".syndeo" / "clusters").exists()


@pytest.mark.parametrize("cloud", ["aws", "azure", "alibaba"])
def test_missing_credentials_one_line_before_anything(cloud: str, tmp_path: Path) -> None:
    out = _syndeo(tmp_path, "--target", cloud, *MACHINE[cloud])
    assert out.returncode == 2, out
    assert f"{cloud}: no " in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    # Nothing was created: no Terraform state, no init.
    assert not list((tmp_path / ".syndeo").rglob("terraform.tfstate"))
    assert not list((tmp_path / ".syndeo").rglob(".terraform"))


def test_missing_google_credentials_one_line(tmp_path: Path) -> None:
    out = _syndeo(
        tmp_path, "--target", "gcp", *MACHINE["gcp"], "--config", str(_gcp_project(tmp_path))
    )
    assert out.returncode == 2, out
    assert "no Google credentials found" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not list((tmp_path / ".syndeo").rglob("terraform.tfstate"))


# ------------------------------------------------------------------ node groups
GROUPED = """\
target = "{cloud}"
cpus_per_node = 2                  # the head: the top-level type
[{cloud}]
instance_type = "{top}"
region = "{region}"
image = "{image}"
{extra}
[[groups]]
name = "cpu"
nodes = 2
cpus_per_node = 8
[groups.{cloud}]
instance_type = "{cpu}"
[[groups]]
name = "gpu"
nodes = 1
cpus_per_node = 4
gpus_per_node = 1
[groups.{cloud}]
instance_type = "{gpu}"
[groups.{other}]                   # another cloud's section: ignored here
instance_type = "whatever"
zone = "not-checked-here"
"""
GROUP_TYPES = {
    "aws": ("m7i.large", "c7i.2xlarge", "g5.xlarge", "gcp"),
    "gcp": ("c3-standard-4", "c3-standard-8", "g2-standard-4", "azure"),
    "azure": ("Standard_D2s_v5", "Standard_D8s_v5", "Standard_NC4as_T4_v3", "aws"),
    "alibaba": ("ecs.g7.large", "ecs.c7.2xlarge", "ecs.gn7i-c8g1.2xlarge", "aws"),
}


def _grouped(tmp_path: Path, cloud: str, **changes: str) -> Path:
    top, cpu, gpu, other = GROUP_TYPES[cloud]
    fields = {
        "cloud": cloud,
        "top": top,
        "cpu": cpu,
        "gpu": gpu,
        "other": other,
        "region": MACHINE[cloud][3],
        "image": MACHINE[cloud][5],
        "extra": 'project = "my-project"' if cloud == "gcp" else "",
    }
    text = GROUPED.format(**fields)
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new)
    cfg = tmp_path / "grouped.toml"
    cfg.write_text(text)
    return cfg


@pytest.mark.parametrize("cloud", sorted(MACHINE))
def test_dry_run_with_groups_has_each_groups_instance_type(cloud: str, tmp_path: Path) -> None:
    out = _syndeo(tmp_path, "--config", str(_grouped(tmp_path, cloud)), "--dry-run")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    tfvars = json.loads("\n".join(ln[4:] for ln in lines if ln.startswith("#   ")))
    top, cpu, gpu, _ = GROUP_TYPES[cloud]
    assert tfvars["node"]["node_count"] == 4 and tfvars["instance_type"] == top
    got = [(g["name"], g["nodes"], g["cpus"], g["gpus"]) for g in tfvars["node"]["groups"]]
    assert got == [("head", 1, 2, 0), ("cpu", 2, 8, 0), ("gpu", 1, 4, 1)]
    # The head group names no type of its own: it gets the top-level instance_type.
    assert tfvars["group_instance_types"] == {"cpu": cpu, "gpu": gpu}
    assert not (tmp_path / ".syndeo").exists(), "a dry run wrote files"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {'instance_type = "g5.xlarge"': 'instance_type = "g5.xlarge"\nspot = true'},
            "group 'gpu': [groups.aws] spot is not a per-group setting (only instance_type",
        ),
        (
            {
                'instance_type = "c7i.2xlarge"': (
                    'instance_type = "c7i.2xlarge"\nregion = "eu-west-1"'
                )
            },
            "group 'cpu': [groups.aws] region is not a per-group setting",
        ),
        (
            {'instance_type = "g5.xlarge"': "instance_type = 5"},
            "group 'gpu': [groups.aws] instance_type must be a non-empty string, got 5",
        ),
    ],
)
def test_bad_group_settings_one_line_before_anything(
    change: dict[str, str], expected: str, tmp_path: Path
) -> None:
    cfg = _grouped(tmp_path, "aws", **change)
    for args in (["--dry-run"], []):  # a real deploy stops at the same line, before credentials
        out = _syndeo(tmp_path, "--config", str(cfg), *args)
        assert out.returncode == 2, out
        assert expected in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
        assert not (tmp_path / ".syndeo" / "clusters").exists()


def test_machine_summary_records_each_groups_type(tmp_path: Path) -> None:
    """deploy.json's machines: what `invoke compare` prices group by group."""
    from syndeo.launcher.config import load_config
    from syndeo.launcher.spec import ClusterSpec
    from syndeo.launcher.targets.aws import AwsTarget

    cfg = load_config(_grouped(tmp_path, "aws"))
    target = AwsTarget(cfg)
    spec = ClusterSpec.from_config(cfg, "s3://syndeo-0123456789ab/syndeo", "c1")
    summary = target.machine_summary(spec)
    assert summary == {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "m7i.large",
        "count": 4,
        "spot": False,
        "groups": [
            {"name": "head", "instance_type": "m7i.large", "count": 1},
            {"name": "cpu", "instance_type": "c7i.2xlarge", "count": 2},
            {"name": "gpu", "instance_type": "g5.xlarge", "count": 1},
        ],
    }
    # Without groups, nothing new.
    plain = load_config(None, target="aws", nodes=2, aws=dict(cfg.aws))
    spec = ClusterSpec.from_config(plain, "s3://syndeo-0123456789ab/syndeo", "c1")
    assert "groups" not in AwsTarget(plain).machine_summary(spec)


def test_azure_down_from_a_new_shell_finds_the_storage_account(
    syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The account deploy chose lives in the launcher's environment only; what the
    launch records brings it back in a shell that never had it (down, grow)."""
    from syndeo.launcher.config import DeployConfig
    from syndeo.launcher.spec import ClusterSpec
    from syndeo.launcher.state import load_launched, save_launched, store_env
    from syndeo.launcher.targets import get_target
    from syndeo.rendezvous import open_rendezvous
    from tests.support.launched import make_launched

    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "placeholder")
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT")  # (restored to absent afterwards)
    flags = MACHINE["azure"]
    cfg = DeployConfig.model_validate(
        {
            "target": "azure",
            "nodes": 2,
            "azure": {"instance_type": flags[1], "region": flags[3], "image": flags[5]},
        }
    )
    target = get_target(cfg)
    uri = target.default_rendezvous()  # picks the account, in this process
    account = os.environ["AZURE_STORAGE_ACCOUNT"]
    spec = ClusterSpec.from_config(cfg, uri, "azure-newshell")
    recorded = target.rendezvous_env(spec)  # type: ignore[attr-defined]
    assert recorded == {"AZURE_STORAGE_ACCOUNT": account}
    save_launched(make_launched("azure", "azure-newshell", uri, rendezvous_env=recorded))
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT")  # a new shell
    with pytest.raises(Exception, match=r"AZURE_STORAGE_ACCOUNT|account"):
        open_rendezvous(uri, "azure-newshell")  # what down did before
    os.environ.update(store_env(load_launched("azure-newshell")))  # as down and grow do
    assert os.environ["AZURE_STORAGE_ACCOUNT"] == account
    assert open_rendezvous(uri, "azure-newshell").bucket == uri.split("/")[2]
