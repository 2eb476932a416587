"""Each module's input validation, exercised by the real terraform on good and bad values.

variables.tf needs no provider, so it runs for all three clouds offline (the rest of
the gcp and azure modules cannot be planned here): the file is copied into a
provider-free module and `terraform test` plans it once per case, expecting the
variable's own validation to fail for every bad value and nothing to fail for a good one.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl
from tests.support.tfvars import BASE, COMMON


def _groups(*shapes: tuple[int, int]) -> list[dict[str, Any]]:
    """node.groups as tfvars: (nodes, gpus) per group, named g0, g1, ..."""
    return [
        {"name": f"g{i}", "nodes": nodes, "cpus": 2, "gpus": gpus}
        for i, (nodes, gpus) in enumerate(shapes)
    ]


# (variable, value, accepted[, other variables the case sets])
SHARED_CASES: list[tuple[Any, ...]] = [
    ("admin_cidrs", ["10.8.0.0/16", "fd00::/8"], True),
    ("admin_cidrs", ["10.8.0.0/16", "0.0.0.0/0"], False),
    ("admin_cidrs", ["::/0"], False),
    ("admin_cidrs", ["not-a-cidr"], False),
    ("rendezvous_prefix", "", True),
    ("rendezvous_prefix", "team/syndeo", True),
    ("rendezvous_prefix", "a//b", False),
    ("rendezvous_prefix", "../up", False),
    ("rendezvous_prefix", "/lead", False),
    ("bucket_name", "ab", False),
    ("bucket_name", "Upper-Case", False),
    ("labels", {"team": "ml-1"}, True),
    ("labels", {"Team": "ml"}, False),
    ("network_cidr", "10.42.0.0/16", True),
    ("network_cidr", "10.42.0.0/24", False),
    ("disk_size_gb", 29, False),  # the baked image is 30 GiB: no cloud takes a smaller disk
    ("disk_size_gb", 30, True),
    ("image_path", "relative.sif", False),
    # A group's own type: only for a group of node.groups (its format: the cloud's cases).
    ("group_instance_types", {}, True),
    (
        "group_instance_types",
        {"g9": "x"},
        False,
        {"node": {**COMMON["node"], "groups": _groups((3, 0))}},
    ),
]
TWO_GROUPS = {"node": {**COMMON["node"], "groups": _groups((1, 0), (2, 1))}}
CLOUD_CASES: dict[str, list[tuple[Any, ...]]] = {
    "alibaba": [
        ("image", "m-bp1g7004ksh0oeuc1234", True),
        ("image", "ami-0123456789abcdef0", False),
        ("image", "m-short", False),
        ("region", "eu-central-1", True),
        ("region", "ap-southeast-1", True),
        ("region", "cn-hangzhou-h", False),
        ("region", "westeurope", False),
        ("zone", "cn-hangzhou-h", True),
        ("zone", "ap-southeast-1a", True),
        ("zone", "cn-hangzhou", False),
        ("instance_type", "ecs.gn7i-c8g1.2xlarge", True),
        ("instance_type", "c7i.2xlarge", False),
        ("instance_type", "ecs.g7", False),
        ("group_instance_types", {"g1": "ecs.gn7i-c8g1.2xlarge"}, True, TWO_GROUPS),
        ("group_instance_types", {"g1": "g5.xlarge"}, False, TWO_GROUPS),
        ("disk_category", "cloud_auto", True),
        ("disk_category", "local_disk", False),
        ("node_role", "syndeo-nodes", True),
        ("node_role", "acs:ram::123:role/syndeo-nodes", False),
    ],
    "aws": [
        ("permissions_boundary", "arn:aws:iam::123456789012:policy/syndeo-node-boundary", True),
        ("permissions_boundary", "syndeo-node-boundary", False),
        ("image", "ami-xyz", False),
        ("region", "eu-central-1", True),
        ("region", "westeurope", False),
        ("zone", "us-east-1a", True),
        ("zone", "1", False),
        ("instance_type", "Standard_D8s_v5", False),
        ("group_instance_types", {"g1": "g5.xlarge"}, True, TWO_GROUPS),
        ("group_instance_types", {"g1": "g2-standard-4"}, False, TWO_GROUPS),
    ],
    "gcp": [
        ("node_service_account", "syndeo-nodes@my-project-123.iam.gserviceaccount.com", True),
        ("node_service_account", "syndeo-nodes", False),
        ("image", "projects/debian-cloud/global/images/debian-12-bookworm-v20261101", True),
        ("image", "https://www.googleapis.com/compute/v1/projects/p-1/global/images/syndeo", True),
        ("image", "debian-12", False),
        ("image", "ami-0123456789abcdef0", False),
        ("region", "northamerica-northeast1", True),
        ("region", "us-central1-a", False),
        ("zone", "europe-west4-b", True),
        ("zone", "europe-west4", False),
        ("instance_type", "custom-8-16384", True),
        ("instance_type", "c7i.2xlarge", False),
        ("group_instance_types", {"g1": "g2-standard-4"}, True, TWO_GROUPS),
        ("group_instance_types", {"g1": "Standard_NC4as_T4_v3"}, False, TWO_GROUPS),
        ("project", "My_Project", False),
        ("disk_type", "hyperdisk-balanced", True),
        ("disk_type", "hyperdisk-extreme", False),  # cannot be a boot disk
    ],
    "azure": [
        ("resource_group", "syndeo-rg", True),
        ("resource_group", "bad/name", False),
        (
            "image",
            "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/"
            "providers/Microsoft.Compute/galleries/g/images/syndeo/versions/1.0.0",
            True,
        ),
        ("image", "ami-0123456789abcdef0", False),
        ("region", "eastus2", True),
        ("region", "West Europe", False),
        ("zone", "3", True),
        ("zone", "4", False),
        ("instance_type", "c7i.2xlarge", False),
        ("instance_type", "Standard_E8-4ds_v5", True),  # constrained vCPUs: a hyphen
        ("disk_type", "StandardSSD_LRS", True),
        ("disk_type", "UltraSSD_LRS", False),  # not an OS disk type
        ("group_instance_types", {"g1": "Standard_NC4as_T4_v3"}, True, TWO_GROUPS),
        ("group_instance_types", {"g1": "g5.xlarge"}, False, TWO_GROUPS),
        ("storage_account", "syndeo0123", True),
        ("storage_account", "Syndeo_Acc", False),
        ("admin_ssh_public_key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDqz", True),
        ("admin_ssh_public_key", "not a key", False),
    ],
}

# The node settings: attributes of terraform/modules/node's one `node` object, checked
# there once for every module that passes it on.  (attribute, value, accepted[, other
# attributes the case sets]); each case changes a valid base (run "baseline"), so a
# refusal is its own.
NODE_BASE = {"cluster_id": "c1", "node_count": 3, "rendezvous": "s3://b/p", "target": "aws"}
NODE_CASES: list[tuple[Any, ...]] = [
    ("cluster_id", "a" * 40, True),
    ("cluster_id", "a" * 41, False),
    ("cluster_id", "-lead", False),
    ("node_count", 4096, True),
    ("node_count", 2.5, False),
    ("cpus_per_node", 0, False),
    ("gpus_per_node", 65, False),
    ("memory_mb_per_node", 255, False),
    ("object_store_mb_per_node", 79, False),
    ("join_timeout_s", 0, False),
    ("not_before", -1, False),
    ("workdir_digest", "ab" * 32, True),
    ("workdir_digest", "AB" * 32, False),
    ("workdir_digest", "ab" * 31, False),
    ("wheelhouse_digest", "cd" * 32, True),
    ("wheelhouse_digest", "sha256:" + "cd" * 32, False),
    ("run", "echo a\necho b", False),
    ("image_digest", "sha256:" + "a" * 64, True),
    ("image_digest", "md5:abc", False),
    ("extra_env", {"AWS_ENDPOINT_URL_S3": "http://10.0.0.1:9000"}, True),
    ("extra_env", {"SYNDEO_TLS": "1"}, True),  # not a node setting: passes through
    ("extra_env", {"SYNDEO_RANK": "7"}, False),
    ("extra_env", {"lower": "x"}, False),
    # Groups (node_count = 3).
    ("groups", [], True),
    ("groups", _groups((1, 0), (2, 1)), True),
    ("groups", _groups((1, 0), (1, 1)), False),  # 2 nodes, node_count 3
    ("groups", _groups((0, 0), (3, 1)), False),  # the first group holds the head
    ("groups", [{**g, "name": "g"} for g in _groups((1, 0), (2, 1))], False),  # a name twice
    ("groups", [{**g, "name": "GPU"} for g in _groups((3, 1))], False),
    ("groups", [{**g, "min_nodes": 4} for g in _groups((3, 0))], False),
    ("groups", [{**g, "memory_mb": 255} for g in _groups((3, 0))], False),
    ("groups", [{**g, "gpus": 65} for g in _groups((3, 0))], False),
    ("settings", {"dashboard": True}, True),  # rules of their own: tests/iac/test_roots.py
    # Nodes `grow` added (node_count = 3): past node_count, in a group, never twice.
    ("grown", [], True),
    (
        "grown",
        [{"rank": 3, "group": "g1"}, {"rank": 9, "group": "g0"}],
        True,
        {"groups": _groups((1, 0), (2, 1))},
    ),
    ("grown", [{"rank": 2, "group": "g1"}], False, {"groups": _groups((1, 0), (2, 1))}),
    ("grown", [{"rank": 3.5, "group": "g1"}], False, {"groups": _groups((1, 0), (2, 1))}),
    ("grown", [{"rank": 3, "group": "gpu"}], False, {"groups": _groups((1, 0), (2, 1))}),
    ("grown", [{"rank": 3, "group": "g1"}], False),  # no groups: nothing to grow into
    (
        "grown",
        [{"rank": 3, "group": "g1"}, {"rank": 3, "group": "g0"}],
        False,
        {"groups": _groups((1, 0), (2, 1))},
    ),
]


def _hcl_value(value: Any) -> str:
    # HCL's native syntax accepts JSON literals (objects with ':' too).
    return json.dumps(value)


def _runs(base: dict[str, Any], cases: list[tuple[Any, ...]], case: Any) -> tuple[str, int]:
    """A tftest file: ``base`` as its variables, a baseline run and one run per case;
    ``case(name, value, others)`` gives a case's variables block lines and what fails."""
    lines = ["variables {"]
    lines += [f"  {k} = {_hcl_value(v)}" for k, v in base.items()]
    lines += ["}", "", 'run "baseline" {', "  command = plan", "}"]
    for i, (name, value, ok, *more) in enumerate(cases):
        verdict = "ok" if ok else "refused"
        lines += ["", f'run "case_{i}_{name}_{verdict}" {{', "  command = plan"]
        variables, failing = case(name, value, more[0] if more else {})
        lines += ["  variables {", *variables, "  }"]
        if not ok:
            lines.append(f"  expect_failures = [var.{failing}]")
        lines.append("}")
    return "\n".join(lines) + "\n", len(cases) + 1


def _cloud_case(name: str, value: Any, others: dict[str, Any]) -> tuple[list[str], str]:
    return [f"    {k} = {_hcl_value(v)}" for k, v in {name: value, **others}.items()], name


def _node_case(name: str, value: Any, others: dict[str, Any]) -> tuple[list[str], str]:
    return [f"    node = merge(var.node, {_hcl_value({name: value, **others})})"], "node"


def _terraform_test(module: Path, text: str, runs: int) -> None:
    (module / "tests").mkdir(exist_ok=True)
    (module / "tests" / "validation.tftest.hcl").write_text(text)
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(module / ".terraform")}
    out = hcl.run_tf("init", "-backend=false", cwd=module, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    out = hcl.run_tf("test", "-no-color", cwd=module, env=env)
    failed = re.findall(r'run "([^"]+)"\.\.\. fail', out.stdout)
    assert out.returncode == 0, f"failed runs {failed}:\n{out.stdout[-4000:]}{out.stderr[-2000:]}"
    assert f"Success! {runs} passed, 0 failed." in out.stdout, out.stdout[-2000:]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_variable_validation(cloud: str, tmp_path: Path) -> None:
    shutil.copy(hcl.TERRAFORM / cloud / "variables.tf", tmp_path / "variables.tf")
    (tmp_path / "main.tf").write_text('output "node" {\n  value = var.node\n}\n')
    base = {**COMMON, **BASE[cloud]}
    _terraform_test(tmp_path, *_runs(base, SHARED_CASES + CLOUD_CASES[cloud], _cloud_case))


def test_node_settings_validation(tmp_path: Path) -> None:
    """Every node setting's rules, once, in terraform/modules/node (the cloud and ssh
    modules pass the same object on)."""
    shutil.copytree(hcl.NODE_MODULE, tmp_path / "node", ignore=shutil.ignore_patterns("tests"))
    _terraform_test(tmp_path / "node", *_runs({"node": NODE_BASE}, NODE_CASES, _node_case))


# The deploy/ roots' own settings (the provider's; every other variable is the module's).
ROOT_CASES: dict[str, list[tuple[str, Any, bool]]] = {
    "aws": [
        ("api_max_retries", 3, True),
        ("api_max_retries", 2.5, False),
        ("api_max_retries", 101, False),
        ("api_max_retries", None, True),
    ],
}


@pytest.mark.parametrize("cloud", sorted(ROOT_CASES))
def test_deploy_root_validation(cloud: str, tmp_path: Path) -> None:
    shutil.copy(hcl.TERRAFORM / cloud / "deploy" / "variables.tf", tmp_path / "variables.tf")
    (tmp_path / "main.tf").write_text("")
    lines = ['run "baseline" {', "  command = plan", "}"]
    for i, (name, value, ok) in enumerate(ROOT_CASES[cloud]):
        lines += [
            f'run "case_{i}_{name}" {{',
            "  command = plan",
            "  variables {",
            f"    {name} = {_hcl_value(value)}",
            "  }",
        ]
        lines += [] if ok else [f"  expect_failures = [var.{name}]"]
        lines.append("}")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "root.tftest.hcl").write_text("\n".join(lines) + "\n")
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    assert hcl.run_tf("init", "-backend=false", cwd=tmp_path, env=env).returncode == 0
    out = hcl.run_tf("test", "-no-color", cwd=tmp_path, env=env)
    runs = len(ROOT_CASES[cloud]) + 1
    assert f"Success! {runs} passed, 0 failed." in out.stdout, out.stdout[-2000:] + out.stderr
