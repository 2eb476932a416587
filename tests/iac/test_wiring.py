"""How each cloud module hands the node module's output to its VMs, read from the HCL.

The AWS module's wiring is also proven by `terraform test` (tests/iac/test_aws.py:
user-data equal to the node module's rendering per rank); google and azurerm cannot be
planned here, so these checks are what holds the GCP and Azure modules to the same
rule: user-data comes from terraform/modules/node, per rank, unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.iac import hcl

VM = {
    "aws": ("aws_instance", "user_data_base64"),
    "gcp": ("google_compute_instance", "metadata.user-data"),
    "azure": ("azurerm_linux_virtual_machine", "custom_data"),
}
# The API takes base64 (AWS attribute that keeps the bytes in state, Azure custom data).
EXPECTED = {
    "aws": "${base64encode(module.nodes.user_data[count.index])}",
    "gcp": "${module.nodes.user_data[count.index]}",
    "azure": "${base64encode(module.nodes.user_data[count.index])}",
}
PASS_THROUGH = (
    "cluster_id", "node_count", "rendezvous", "target", "cpus_per_node", "gpus_per_node",
    "memory_mb_per_node", "object_store_mb_per_node", "join_timeout_s", "run", "not_before",
    "image_path", "image_digest", "extra_env",
)  # fmt: skip


def _module_block(cloud: str) -> dict[str, Any]:
    blocks = [
        body
        for f in hcl.tf_files(hcl.TERRAFORM / cloud)
        if f.parent == hcl.TERRAFORM / cloud
        for block in hcl.load(f).get("module", [])
        for name, body in block.items()
        if hcl.unquote(name) == "nodes"
    ]
    assert len(blocks) == 1, f'terraform/{cloud}: expected one module "nodes"'
    return blocks[0]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_user_data_is_the_node_modules_per_rank(cloud: str) -> None:
    rtype, attr = VM[cloud]
    vms = [
        body
        for f in hcl.tf_files(hcl.TERRAFORM / cloud)
        if f.parent == hcl.TERRAFORM / cloud
        for t, _, body in hcl.resources(f)
        if t == rtype
    ]
    assert len(vms) == 1, f"terraform/{cloud}: expected one {rtype}"
    vm = vms[0]
    assert vm["count"] == "${var.node_count}"
    value: Any = vm
    for part in attr.split("."):
        value = value[part]
    assert value == EXPECTED[cloud]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_node_module_call(cloud: str) -> None:
    block = _module_block(cloud)
    assert hcl.unquote(block["source"]) == "../modules/node"
    assert hcl.unquote(block["target"]) == cloud
    args = {k for k in block if not k.startswith("__") and k != "source"}
    assert args == set(PASS_THROUGH)
    for name in ("cluster_id", "node_count", "cpus_per_node", "run", "image_path"):
        want = {"cluster_id": "cluster_name"}.get(name, name)
        assert block[name] == f"${{var.{want}}}", f"{cloud}: {name} = {block[name]}"
    assert block["rendezvous"] == "${local.rendezvous_uri}"
    # The caller's extra_env wins over the module's own entries (emulator endpoints).
    assert str(block["extra_env"]).endswith(", var.extra_env)}")


def test_rendezvous_uri_schemes() -> None:
    for cloud, scheme in (("aws", "s3"), ("gcp", "gs"), ("azure", "az")):
        locals_ = [
            body
            for f in hcl.tf_files(hcl.TERRAFORM / cloud)
            if f.parent == hcl.TERRAFORM / cloud
            for body in hcl.load(f).get("locals", [])
            if "rendezvous_uri" in body
        ]
        assert len(locals_) == 1
        uri = hcl.unquote(locals_[0]["rendezvous_uri"])
        assert uri.startswith(f"{scheme}://${{"), uri
        assert uri.endswith("/${local.prefix}"), uri


PUBLIC_PATHS = {
    "aws_internet_gateway", "aws_egress_only_internet_gateway", "aws_nat_gateway", "aws_eip",
    "google_compute_router_nat", "google_compute_address", "google_compute_global_address",
    "azurerm_public_ip", "azurerm_public_ip_prefix", "azurerm_nat_gateway",
}  # fmt: skip


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_no_public_address_or_internet_path(cloud: str) -> None:
    found = [
        (f.name, t, n, body)
        for f in hcl.tf_files(hcl.TERRAFORM / cloud)
        for t, n, body in hcl.resources(f)
    ]
    assert found
    assert not [f"{t}.{n}" for _, t, n, _ in found if t in PUBLIC_PATHS]
    for _, t, n, body in found:
        if t == "google_compute_instance":
            assert all("access_config" not in ni for ni in body["network_interface"]), n
        if t == "azurerm_network_interface":
            assert all("public_ip_address_id" not in ip for ip in body["ip_configuration"]), n
        if t == "aws_instance":
            assert body["associate_public_ip_address"] is False, n
        if t == "aws_subnet":
            assert body["map_public_ip_on_launch"] is False, n
        if t == "azurerm_subnet":
            assert body["default_outbound_access_enabled"] is False, n
