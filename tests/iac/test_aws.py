"""terraform/aws against the real hashicorp/aws provider binary baked into this machine
image (/opt/tf-plugins; providers cannot be downloaded here): init, validate (module
and example), and `terraform test` — a mocked apply that checks no public IPs, IMDSv2,
encrypted disks, member-only rules, the prefix-only role and that every instance's
user-data is the node module's rendering for its rank; with node groups, each rank's
instance type is its group's (else instance_type) and its user-data names its group;
growing adds instances keyed by their ranks without replacing the cluster's own.

Runs in a copy of terraform/ so that no .terraform/ or lock file lands in the repo.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import hcl

PLUGINS = Path("/opt/tf-plugins")
AWS_PLUGIN = PLUGINS / "registry.terraform.io" / "hashicorp" / "aws"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Not a skip: the provider is part of this machine image, and without it the AWS
    # module would go unchecked.
    assert any(AWS_PLUGIN.glob("*/linux_amd64/terraform-provider-aws_*")), (
        f"no hashicorp/aws provider under {AWS_PLUGIN}: it is part of the machine image "
        "(terraform cannot download providers here), so the AWS module cannot be checked"
    )
    root = tmp_path_factory.mktemp("tf")
    shutil.copytree(
        hcl.TERRAFORM,
        root / "terraform",
        ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*"),
    )
    return root / "terraform"


def _init(folder: Path) -> dict[str, str]:
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(folder / ".terraform")}
    out = hcl.run_tf(
        "init", "-backend=false", "-input=false", f"-plugin-dir={PLUGINS}", cwd=folder, env=env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return env


@pytest.mark.parametrize(
    "where", ["aws", "aws/deploy", "aws/examples/minimal", "aws/examples/fleet"]
)
def test_validate(tree: Path, where: str) -> None:
    env = _init(tree / where)
    out = hcl.run_tf("validate", "-no-color", cwd=tree / where, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "The configuration is valid" in out.stdout


@pytest.mark.slow
def test_terraform_test(tree: Path) -> None:
    env = _init(tree / "aws")
    out = hcl.run_tf("test", "-no-color", cwd=tree / "aws", env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout, out.stdout
    # Every run block in the test file ran (a renamed file would otherwise test nothing).
    files = (tree / "aws" / "tests").glob("*.tftest.hcl")
    runs = sum(p.read_text().count('\nrun "') for p in files)
    assert runs >= 10 and f"Success! {runs} passed, 0 failed." in out.stdout, out.stdout


def test_every_taggable_resource_carries_the_cluster_tags(tree: Path) -> None:
    """The caller's provider may set no default_tags, so each resource names the
    cluster's tags itself: the deployer policy allows creating and deleting only what
    carries ``syndeo-cluster``, and teardown finds leftovers by it.  Which resources take
    tags comes from the real provider's schema."""
    env = _init(tree / "aws")
    out = hcl.run_tf("providers", "schema", "-json", cwd=tree / "aws", env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    schemas = json.loads(out.stdout)["provider_schemas"]
    aws = schemas["registry.terraform.io/hashicorp/aws"]["resource_schemas"]
    taggable = []
    for path in sorted((hcl.TERRAFORM / "aws").glob("*.tf")):
        for rtype, name, body in hcl.resources(path):
            if "tags" in aws[rtype]["block"]["attributes"]:
                taggable.append(f"{rtype}.{name}")
                assert "local.tags" in str(body.get("tags")), f"{rtype}.{name} has no local.tags"
    assert len(taggable) >= 15, taggable
