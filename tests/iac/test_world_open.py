"""No ingress rule anywhere under terraform/ admits the whole internet.

checkov misses some of this (it passes CKV_AWS_24 for a security group whose first
inline rule is ``self = true`` even when a later one opens 22 to the world), so every
ingress form of the four clouds is read here with python-hcl2.  The negative fixture
proves each form is caught.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl

FIXTURE = Path(__file__).parent / "fixtures" / "world_open"
WORLD = {"0.0.0.0/0", "::/0", "*", "internet", "any", "0.0.0.0"}
VAR_REF = re.compile(r"^\$\{var\.([A-Za-z0-9_-]+)\}$")


def _values(raw: Any, defaults: dict[str, Any]) -> list[str]:
    """The literal sources a field may hold; a plain ``var.x`` is replaced by its default."""
    raw = hcl.unquote(raw)
    items = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and (m := VAR_REF.match(item)) and m.group(1) in defaults:
            out += _values(defaults[m.group(1)], {})
        elif isinstance(item, str):
            out.append(item)
    return out


def _open(raw: Any, defaults: dict[str, Any]) -> list[str]:
    return [v for v in _values(raw, defaults) if v.strip().lower() in WORLD]


def _blocks(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    found = body.get(name, [])
    return [b for b in found if isinstance(b, dict)] if isinstance(found, list) else []


def _azure_rule(rule: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    direction = str(hcl.unquote(rule.get("direction", ""))).lower()
    access = str(hcl.unquote(rule.get("access", ""))).lower()
    if direction != "inbound" or access != "allow":
        return []
    return _open(rule.get("source_address_prefix"), defaults) + _open(
        rule.get("source_address_prefixes"), defaults
    )


def findings(root: Path) -> list[str]:
    """``file:type.name: value`` for every ingress that admits the internet."""
    out: list[str] = []
    for path in hcl.tf_files(root):
        defaults = {
            hcl.unquote(n): b.get("default")
            for block in hcl.load(path).get("variable", [])
            for n, b in block.items()
        }
        for rtype, name, body in hcl.resources(path):
            bad: list[str] = []
            if rtype == "aws_security_group":
                for rule in _blocks(body, "ingress"):
                    bad += _open(rule.get("cidr_blocks"), defaults)
                    bad += _open(rule.get("ipv6_cidr_blocks"), defaults)
            elif rtype == "aws_security_group_rule":
                if hcl.unquote(body.get("type")) == "ingress":
                    bad += _open(body.get("cidr_blocks"), defaults)
                    bad += _open(body.get("ipv6_cidr_blocks"), defaults)
            elif rtype == "aws_vpc_security_group_ingress_rule":
                bad += _open(body.get("cidr_ipv4"), defaults)
                bad += _open(body.get("cidr_ipv6"), defaults)
            elif rtype == "google_compute_firewall":
                direction = str(hcl.unquote(body.get("direction", "INGRESS"))).upper()
                if direction == "INGRESS" and "allow" in body:
                    bad += _open(body.get("source_ranges"), defaults)
            elif rtype == "alicloud_security_group_rule":
                accept = str(hcl.unquote(body.get("policy", "accept"))).lower() == "accept"
                if hcl.unquote(body.get("type")) == "ingress" and accept:
                    bad += _open(body.get("cidr_ip"), defaults)
                    bad += _open(body.get("ipv6_cidr_ip"), defaults)
            elif rtype == "azurerm_network_security_rule":
                bad += _azure_rule(body, defaults)
            elif rtype == "azurerm_network_security_group":
                for rule in _blocks(body, "security_rule"):
                    bad += _azure_rule(rule, defaults)
            out += [f"{path.relative_to(root)}:{rtype}.{name}: {v}" for v in bad]
    return out


def test_no_ingress_from_the_internet() -> None:
    assert hcl.tf_files(hcl.TERRAFORM), "no Terraform files found under terraform/"
    assert findings(hcl.TERRAFORM) == []


def test_every_cloud_module_has_ingress_rules_this_test_reads() -> None:
    """Guards the test above: it must actually see each cloud's rule resources."""
    kinds = {
        "aws": "aws_vpc_security_group_ingress_rule",
        "gcp": "google_compute_firewall",
        "azure": "azurerm_network_security_rule",
        "alibaba": "alicloud_security_group_rule",
    }
    for cloud, rtype in kinds.items():
        seen = [
            r
            for f in hcl.tf_files(hcl.TERRAFORM / cloud)
            for r in hcl.resources(f)
            if r[0] == rtype
        ]
        assert seen, f"terraform/{cloud} has no {rtype}"


@pytest.mark.parametrize(
    "expected",
    [
        "aws_security_group.inline_self_first: 0.0.0.0/0",
        "aws_security_group_rule.v6: ::/0",
        "aws_vpc_security_group_ingress_rule.through_variable: 0.0.0.0/0",
        "google_compute_firewall.default_direction: 0.0.0.0/0",
        "azurerm_network_security_rule.internet_tag: Internet",
        "azurerm_network_security_group.inline_star: *",
        "alicloud_security_group_rule.ali_world: 0.0.0.0/0",
    ],
)
def test_fixture_is_caught(expected: str) -> None:
    assert f"main.tf:{expected}" in findings(FIXTURE)


def test_fixture_non_findings_stay_quiet() -> None:
    found = findings(FIXTURE)
    assert len(found) == 7, found
    for quiet in ("deny_all", "egress", "members"):
        assert not [f for f in found if f".{quiet}:" in f]
