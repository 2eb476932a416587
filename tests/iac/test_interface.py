"""The three cloud modules share one interface: the node settings as one object (node,
declared and validated once, in terraform/modules/node), and machine variables with the
same names, types and defaults (and the same validation wherever the rule is not
cloud-specific), the same outputs; every variable typed, described and validated; bounds
as in syndeo/launcher/config.py."""

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
    "node",
    "launch_key",
    "instance_type",
    "group_instance_types",
    "image",
    "region",
    "zone",
    "spot",
    "disk_size_gb",
    "network_cidr",
    "create_bucket",
    "bucket_name",
    "bucket_versioning",
    "rendezvous_prefix",
    "labels",
    "admin_cidrs",
    "image_path",
)
# What a cloud names differently (machine type, image id, region/zone names).
CLOUD_SPECIFIC_RULES = {"instance_type", "group_instance_types", "image", "region", "zone"}
# Validated where it is declared: terraform/modules/node.
PASSED_ON = {"node"}
OUTPUTS = {
    "head_ip",
    "node_ips",
    "node_ids",
    "rendezvous_uri",
    "bucket_name",
    "instance_types",
    "node_groups",
}
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


@pytest.mark.parametrize("name", sorted(set(SHARED) - CLOUD_SPECIFIC_RULES - PASSED_ON))
def test_same_validation(name: str) -> None:
    rules = {cloud: _rules(v[name]) for cloud, v in _vars().items() if name in v}
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
    group_rules = [r for r in _rules(variables["group_instance_types"]) if "regex" in str(r)]
    assert len(group_rules) == 1, group_rules
    assert _regex(group_rules[0]) == _regex(own)


NODE_SETTINGS = set(
    re.findall(r"(?m)^    (\w+) += ", (hcl.NODE_MODULE / "variables.tf").read_text())
)


@pytest.mark.parametrize("module", [*hcl.CLOUDS, "ssh"])
def test_node_settings_are_declared_once(module: str) -> None:
    """The node settings are attributes of the one node object, typed and validated in
    terraform/modules/node; a cloud or ssh module declares none of them again and passes
    the object on untyped (the node module types it)."""
    assert {"cluster_id", "run", "join_timeout_s", "groups", "extra_env"} <= NODE_SETTINGS
    variables = hcl.variables(hcl.TERRAFORM / module)
    # image_path: a cloud's machine image layout (where packer/cloud installs the SIF).
    again = sorted(NODE_SETTINGS & set(variables) - {"image_path"})
    assert not again, f"terraform/{module} declares node settings {again} of its own"
    assert hcl.unquote(variables["node"]["type"]) in ("any", "${any}")
    assert "default" not in variables["node"]
    node = hcl.variables(hcl.NODE_MODULE)["node"]
    assert hcl.unquote(node["type"]).startswith("${object(")
    assert node.get("nullable") is False and len(node["validation"]) >= 20


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_every_variable_typed_described_validated(cloud: str) -> None:
    for name, body in _vars()[cloud].items():
        assert body.get("type"), f"{cloud}: variable {name} has no type"
        assert len(str(hcl.unquote(body.get("description", "")))) > 10, f"{cloud}: {name}"
        if hcl.unquote(body["type"]) != "bool" and name not in PASSED_ON:
            assert body.get("validation"), f"{cloud}: variable {name} has no validation"


def test_required_inputs_have_no_default() -> None:
    """No default image, bucket or region: those are the user's."""
    for cloud, variables in _vars().items():
        for name in ("node", "instance_type", "image", "region", "bucket_name"):
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
    """The same numbers bound the node setting (terraform/modules/node) and
    syndeo/launcher/config.py's field (test_validation.py shows the conditions behave)."""
    lo, hi = _bounds(field)
    cond = " ".join(r for r in _node_rules() if f"var.node.{variable} " in r)
    numbers = {float(n) for n in re.findall(r"[<>]=?\s*(\d+(?:\.\d+)?)", cond)}
    for bound in (lo, hi):
        if bound is not None:
            assert float(bound) in numbers, f"{variable}: {bound} (config.py) not in {cond!r}"


def _node_rules() -> list[str]:
    return [str(r) for r in _rules(hcl.variables(hcl.NODE_MODULE)["node"])]


def test_cluster_name_pattern_matches_config() -> None:
    [cond] = [r for r in _node_rules() if "var.node.cluster_id" in r]
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
