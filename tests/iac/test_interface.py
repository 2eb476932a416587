"""The three cloud modules share one interface: same variable names, types and defaults
(and the same validation wherever the rule is not cloud-specific), the same outputs;
every variable typed, described and validated; bounds as in syndeo/launcher/config.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from syndeo.core.nodeconfig import CLUSTER_ID_RE
from syndeo.launcher.config import DeployConfig
from tests.support import hcl

SHARED = (
    "cluster_name", "node_count", "instance_type", "image", "region", "zone", "spot",
    "disk_size_gb", "network_cidr", "create_bucket", "bucket_name", "bucket_versioning",
    "rendezvous_prefix", "record_expiry_days", "labels", "admin_cidrs",
    # passed through to terraform/modules/node
    "cpus_per_node", "gpus_per_node", "memory_mb_per_node", "object_store_mb_per_node",
    "join_timeout_s", "run", "not_before", "image_path", "image_digest", "extra_env",
    "groups", "dashboard", "grown",
)  # fmt: skip
# What a cloud names differently (machine type, image id, region/zone names).
CLOUD_SPECIFIC_RULES = {"instance_type", "image", "region", "zone"}
OUTPUTS = {"head_ip", "node_ips", "node_ids", "rendezvous_uri", "bucket_name",
           "instance_types", "node_groups"}  # fmt: skip
MISSING = object()


def _vars() -> dict[str, dict[str, dict[str, Any]]]:
    return {cloud: hcl.variables(hcl.TERRAFORM / cloud) for cloud in hcl.CLOUDS}


def _sig(body: dict[str, Any]) -> tuple[Any, Any]:
    return hcl.unquote(body.get("type")), hcl.unquote(body.get("default", MISSING))


def _rules(body: dict[str, Any]) -> list[Any]:
    return [hcl.unquote(v.get("condition")) for v in body.get("validation", [])]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_shared_variables_present(cloud: str) -> None:
    missing = sorted(set(SHARED) - set(_vars()[cloud]))
    assert not missing, f"terraform/{cloud} lacks {missing}"


@pytest.mark.parametrize("name", SHARED)
def test_same_type_and_default(name: str) -> None:
    sigs = {cloud: _sig(v[name]) for cloud, v in _vars().items() if name in v}
    assert len(set(map(repr, sigs.values()))) == 1, f"{name} differs: {sigs}"


def _shared_rules(name: str, body: dict[str, Any]) -> list[Any]:
    # A group's instance_type follows its cloud's format; every other groups rule is shared.
    rules = _rules(body)
    return [r for r in rules if "instance_type" not in str(r)] if name == "groups" else rules


@pytest.mark.parametrize("name", sorted(set(SHARED) - CLOUD_SPECIFIC_RULES))
def test_same_validation(name: str) -> None:
    rules = {cloud: _shared_rules(name, v[name]) for cloud, v in _vars().items() if name in v}
    assert len(set(map(repr, rules.values()))) == 1, f"{name} validated differently: {rules}"
    if hcl.unquote(_vars()["aws"][name]["type"]) != "bool":
        assert all(rules.values()), f"{name}: no rule left to compare"


def _regex(rule: Any) -> str:
    found = re.findall(r'regex\("((?:[^"\\]|\\.)*)"', str(rule))
    assert len(found) == 1, rule
    return str(found[0])


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_group_instance_type_has_the_clouds_own_format(cloud: str) -> None:
    """A group's instance_type is checked by the same pattern as the top-level one."""
    variables = _vars()[cloud]
    [own] = _rules(variables["instance_type"])
    group_rules = [r for r in _rules(variables["groups"]) if "instance_type" in str(r)]
    assert len(group_rules) == 1, group_rules
    assert _regex(group_rules[0]) == _regex(own)
    assert "g.instance_type == null" in str(group_rules[0])  # null: the top-level type
    assert "instance_type = optional(string)" in variables["groups"]["type"]


def test_group_rules_are_the_node_modules() -> None:
    """What terraform/modules/node refuses, the cloud modules refuse first, with its words."""
    node = hcl.variables(hcl.TERRAFORM / "modules" / "node")["groups"]
    node_rules = [(hcl.unquote(v["condition"]), hcl.unquote(v["error_message"]))
                  for v in node["validation"]]  # fmt: skip
    aws = _vars()["aws"]["groups"]
    aws_rules = [(hcl.unquote(v["condition"]), hcl.unquote(v["error_message"]))
                 for v in aws["validation"]]  # fmt: skip
    assert node_rules and all(rule in aws_rules for rule in node_rules)


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_every_variable_typed_described_validated(cloud: str) -> None:
    for name, body in _vars()[cloud].items():
        assert body.get("type"), f"{cloud}: variable {name} has no type"
        assert len(str(hcl.unquote(body.get("description", "")))) > 10, f"{cloud}: {name}"
        if hcl.unquote(body["type"]) != "bool":
            assert body.get("validation"), f"{cloud}: variable {name} has no validation"


def test_required_inputs_have_no_default() -> None:
    """No default image, bucket or region: those are the user's."""
    for cloud, variables in _vars().items():
        for name in ("cluster_name", "node_count", "instance_type", "image", "region",
                     "bucket_name"):  # fmt: skip
            assert "default" not in variables[name], f"{cloud}: {name} must be required"


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_outputs(cloud: str) -> None:
    found = hcl.outputs(hcl.TERRAFORM / cloud)
    assert set(found) >= OUTPUTS, f"terraform/{cloud} lacks {sorted(OUTPUTS - set(found))}"
    for name, body in found.items():
        assert hcl.unquote(body.get("description")), f"{cloud}: output {name} undescribed"


def _bounds(field: str) -> tuple[Any, Any]:
    lo = hi = None
    for meta in DeployConfig.model_fields[field].metadata:
        lo = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else lo
        lo = getattr(meta, "gt", None) if getattr(meta, "gt", None) is not None else lo
        hi = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else hi
    return lo, hi


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("node_count", "nodes"),
        ("cpus_per_node", "cpus_per_node"),
        ("gpus_per_node", "gpus_per_node"),
        ("memory_mb_per_node", "memory_mb_per_node"),
        ("object_store_mb_per_node", "object_store_mb_per_node"),
        ("join_timeout_s", "join_timeout_s"),
    ],
)
def test_bounds_match_config(variable: str, field: str) -> None:
    """The same numbers bound the Terraform variable and syndeo/launcher/config.py's field (the
    AWS terraform test shows the conditions behave; the texts are identical everywhere)."""
    lo, hi = _bounds(field)
    cond = " ".join(_rules(_vars()["aws"][variable]))
    numbers = {float(n) for n in re.findall(r"[<>]=?\s*(\d+(?:\.\d+)?)", cond)}
    for bound in (lo, hi):
        if bound is not None:
            assert float(bound) in numbers, f"{variable}: {bound} (config.py) not in {cond!r}"


def test_cluster_name_pattern_matches_config() -> None:
    cond = _rules(_vars()["aws"]["cluster_name"])[0]
    assert CLUSTER_ID_RE.pattern.replace("\\", "\\\\") in cond or CLUSTER_ID_RE.pattern in cond


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_readme_tables_list_every_input_and_output(cloud: str) -> None:
    readme = (hcl.TERRAFORM / cloud / "README.md").read_text()
    names = [*hcl.variables(hcl.TERRAFORM / cloud), *hcl.outputs(hcl.TERRAFORM / cloud)]
    missing = [n for n in names if f"| `{n}` |" not in readme]
    assert not missing, f"terraform/{cloud}/README.md tables lack {missing}"


def test_deployer_permissions_have_no_wildcard_actions() -> None:
    aws = json.loads((hcl.TERRAFORM / "aws" / "deployer-policy.json").read_text())
    for st in aws["Statement"]:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        assert all(a.count(":") == 1 and "*" not in a for a in actions), st["Sid"]
    gcp = yaml.safe_load((hcl.TERRAFORM / "gcp" / "deployer-role.yaml").read_text())
    assert gcp["includedPermissions"] and all("*" not in p for p in gcp["includedPermissions"])
    azure = json.loads((hcl.TERRAFORM / "azure" / "deployer-role.json").read_text())
    assert azure["Actions"] and all("*" not in a for a in azure["Actions"])
    # One resource group, never the subscription (tests/iac/test_deployer_policies.py).
    assert azure["AssignableScopes"] == [
        "/subscriptions/SUBSCRIPTION_ID/resourceGroups/RESOURCE_GROUP"
    ]
