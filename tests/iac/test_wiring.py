"""How each cloud module hands the node module's output to its VMs, read from the HCL.

The AWS module's wiring is also proven by `terraform test` (tests/iac/test_aws.py:
user-data equal to the node module's rendering per rank); google and azurerm cannot be
planned here, so these checks are what holds the GCP and Azure modules to the same
rule: user-data comes from terraform/modules/node, per rank, unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl

VM = {
    "aws": ("aws_instance", "user_data_base64"),
    "gcp": ("google_compute_instance", "metadata.user-data"),
    "azure": ("azurerm_linux_virtual_machine", "custom_data"),
    "alibaba": ("alicloud_instance", "user_data"),
}
# The API takes base64 (AWS attribute that keeps the bytes in state, Azure custom data).
EXPECTED = {
    "aws": "${base64encode(each.value.user_data)}",
    "gcp": "${each.value.user_data}",
    "azure": "${base64encode(each.value.user_data)}",
    "alibaba": "${base64encode(each.value.user_data)}",
}
# The node module's arguments: the caller's node object with what the cloud module knows,
# the cloud's own variables for every node, this launch's key.
CALL_ARGS = {"node", "target_env", "launch_key"}
# Where each VM takes its type from (per rank: its group's, else var.instance_type).
TYPE_ATTR = {
    "aws": "instance_type",
    "gcp": "machine_type",
    "azure": "size",
    "alibaba": "instance_type",
}


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
    # Keyed by rank (grow/shrink never move a running node to another address).
    assert "count" not in vm
    assert vm["for_each"] == "${local.machines}"
    value: Any = vm
    for part in attr.split("."):
        value = value[part]
    assert value == EXPECTED[cloud]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_node_module_call(cloud: str) -> None:
    block = _module_block(cloud)
    assert hcl.unquote(block["source"]) == "../modules/node"
    args = {k for k in block if not k.startswith("__") and k != "source"}
    assert args == CALL_ARGS
    node = " ".join(str(block["node"]).split())
    # The caller's settings, unchanged but for what only this module knows (it wins).
    assert node.startswith("${merge(var.node, {") and node.endswith("})}"), node
    assert f'target = "{cloud}"' in node
    assert "rendezvous = local.rendezvous_uri" in node
    assert "image_path = var.image_path" in node
    # Spot VMs' nodes watch their cloud's interruption notice (syndeo/node/preemption.py).
    assert f'spot_notices = var.spot ? "{cloud}" : null' in node
    # No instance type reaches the node module: that is this module's business.
    assert "instance_type" not in node
    # Every node gets this launch's key (a sensitive variable all the way down).
    assert block["launch_key"] == "${var.launch_key}"
    assert isinstance(block["target_env"], dict) and block["target_env"]


def _vm(cloud: str) -> dict[str, Any]:
    rtype = VM[cloud][0]
    [vm] = [
        body
        for f in hcl.tf_files(hcl.TERRAFORM / cloud)
        if f.parent == hcl.TERRAFORM / cloud
        for t, _, body in hcl.resources(f)
        if t == rtype
    ]
    return vm


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_instance_type_is_the_ranks(cloud: str) -> None:
    assert _vm(cloud)[TYPE_ATTR[cloud]] == "${local.machine_types[each.key]}"


def test_azure_per_rank_resources_are_keyed_by_rank() -> None:
    """A VM's NIC and its NIC-to-ASG association follow the VM's key, never an index."""
    found = {
        (t, n): body
        for f in hcl.tf_files(hcl.TERRAFORM / "azure")
        if f.parent == hcl.TERRAFORM / "azure"
        for t, n, body in hcl.resources(f)
    }
    for rtype in (
        "azurerm_network_interface",
        "azurerm_network_interface_application_security_group_association",
    ):
        body = found[(rtype, "node")]
        assert body["for_each"] == "${local.machines}" and "count" not in body, rtype
    vm = found[("azurerm_linux_virtual_machine", "node")]
    assert vm["network_interface_ids"] == ["${azurerm_network_interface.node[each.key].id}"]


# ------------------------------------------------------------- per-rank instance types
# google and azurerm cannot be planned here, but what picks each rank's type (and, on
# GCP, its host-maintenance policy) needs no provider: the locals of instances.tf, the
# real `module "nodes"` call's groups mapping and the module itself are evaluated by
# the real terraform, with the cloud's own variables.tf checking the inputs.
REQUIRED: dict[str, dict[str, Any]] = {
    "aws": {"image": "ami-0123456789abcdef0", "region": "us-east-1", "instance_type": "m7i.large"},
    "gcp": {
        "image": "projects/p/global/images/syndeo",
        "region": "us-central1",
        "instance_type": "c3-standard-4",
        "project": "my-project-123",
    },
    "azure": {
        "image": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
        "i/providers/Microsoft.Compute/images/syndeo",
        "region": "westeurope",
        "instance_type": "Standard_D2s_v5",
        "admin_ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDqz",
    },
    "alibaba": {
        "image": "m-bp1g7004ksh0oeuc1234",
        "region": "cn-hangzhou",
        "instance_type": "ecs.g7.large",
    },
}
GROUP_TYPES = {
    "aws": ("c7i.2xlarge", "g5.xlarge"),
    "gcp": ("c3-standard-8", "g2-standard-4"),
    "azure": ("Standard_D8s_v5", "Standard_NC4as_T4_v3"),
    "alibaba": ("ecs.c7.2xlarge", "ecs.gn7i-c8g1.2xlarge"),
}


class _Rendered:
    """instances.tf's locals of one cloud, evaluated by terraform for given tfvars."""

    def __init__(self, cloud: str, root: Path) -> None:
        shutil.copytree(hcl.TERRAFORM / "modules" / "node", root / "modules" / "node")
        self.cloud, self.work = cloud, root / cloud
        self.work.mkdir()
        shutil.copy2(hcl.TERRAFORM / cloud / "variables.tf", self.work / "variables.tf")
        [locals_] = hcl.unquote(hcl.load(hcl.TERRAFORM / cloud / "instances.tf")["locals"])
        # The real call's node argument (target_env and the key are not needed here).
        module = {"source": "../modules/node", "node": _module_block(cloud)["node"]}
        locals_["rendezvous_uri"] = "s3://b/p"
        outputs = {
            "instance_types": {"value": "${local.instance_types}"},
            "machine_types": {"value": "${local.machine_types}"},
        }
        if cloud == "gcp":
            # The scheduling argument itself, evaluated for every node (grown ones too).
            [sched] = _vm(cloud)["scheduling"]
            expr = str(sched["on_host_maintenance"])[2:-1]
            rank_expr = expr.replace("each.key", "tostring(i)")
            grown_expr = expr.replace("each.key", "k")
            outputs["on_host_maintenance"] = {
                "value": f"${{[for i in range(var.node.node_count) : {rank_expr}]}}"
            }
            outputs["grown_host_maintenance"] = {
                "value": f"${{{{ for k, _ in local.machines : k => {grown_expr} "
                f"if tonumber(k) >= var.node.node_count }}}}"
            }
        doc = {"locals": locals_, "module": {"nodes": module}, "output": outputs}
        (self.work / "main.tf.json").write_text(json.dumps(doc, indent=2))
        self.env = {**hcl.TF_ENV, "TF_DATA_DIR": str(self.work / ".terraform")}
        out = hcl.run_tf("init", "-backend=false", cwd=self.work, env=self.env)
        assert out.returncode == 0, out.stdout + out.stderr

    def __call__(self, node: dict[str, Any], **tfvars: Any) -> dict[str, Any]:
        values = {
            "node": {"cluster_id": "c1", **node},
            "bucket_name": "syndeo-c1",
            **REQUIRED[self.cloud],
            **tfvars,
        }
        (self.work / "t.tfvars.json").write_text(json.dumps(values))
        out = hcl.run_tf(
            "apply",
            "-auto-approve",
            "-no-color",
            "-var-file=t.tfvars.json",
            cwd=self.work,
            env=self.env,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        out = hcl.run_tf("output", "-json", cwd=self.work, env=self.env)
        assert out.returncode == 0, out.stderr
        return {k: v["value"] for k, v in json.loads(out.stdout).items()}


THREE_GROUPS = [
    {"name": "head", "nodes": 1, "cpus": 2, "gpus": 0},
    {"name": "cpu", "nodes": 2, "cpus": 8, "gpus": 0},
    {"name": "gpu", "nodes": 1, "cpus": 4, "gpus": 1},
]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_each_rank_gets_its_groups_instance_type(cloud: str, tmp_path: Path) -> None:
    render = _Rendered(cloud, tmp_path)
    top = REQUIRED[cloud]["instance_type"]
    cpu, gpu = GROUP_TYPES[cloud]
    types = {"cpu": cpu, "gpu": gpu}
    got = render({"node_count": 4, "groups": THREE_GROUPS}, group_instance_types=types)
    assert got["instance_types"] == [top, cpu, cpu, gpu]
    # No groups: every rank is the top-level type.
    assert render({"node_count": 2})["instance_types"] == [top, top]
    if cloud == "gcp":
        # GPUs cannot live-migrate: only the GPU rank stops for host maintenance.
        assert got["on_host_maintenance"] == ["MIGRATE", "MIGRATE", "MIGRATE", "TERMINATE"]


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_grown_nodes_get_their_groups_instance_type(cloud: str, tmp_path: Path) -> None:
    """Nodes `grow` added are machines keyed by their rank, of their group's type; the
    cluster's own ranks keep theirs and the per-rank output stays the cluster's ranks."""
    render = _Rendered(cloud, tmp_path)
    top = REQUIRED[cloud]["instance_type"]
    cpu, gpu = GROUP_TYPES[cloud]
    grown = [{"rank": 4, "group": "gpu"}, {"rank": 7, "group": "cpu"}, {"rank": 5, "group": "head"}]
    node = {"node_count": 4, "groups": THREE_GROUPS, "grown": grown}
    got = render(node, group_instance_types={"cpu": cpu, "gpu": gpu})
    assert got["instance_types"] == [top, cpu, cpu, gpu]
    assert got["machine_types"] == {
        "0": top,
        "1": cpu,
        "2": cpu,
        "3": gpu,
        "4": gpu,
        "5": top,
        "7": cpu,
    }
    if cloud == "gcp":
        assert got["on_host_maintenance"] == ["MIGRATE", "MIGRATE", "MIGRATE", "TERMINATE"]
        assert got["grown_host_maintenance"] == {"4": "TERMINATE", "5": "MIGRATE", "7": "MIGRATE"}


def test_gcp_host_maintenance_by_rank(tmp_path: Path) -> None:
    render = _Rendered("gcp", tmp_path)
    # An accelerator-optimized type has GPUs attached even if the group declares none.
    a2 = [
        {"name": "head", "nodes": 1, "cpus": 2, "gpus": 0},
        {"name": "a2", "nodes": 1, "cpus": 12, "gpus": 0},
    ]
    got = render({"node_count": 2, "groups": a2}, group_instance_types={"a2": "a2-highgpu-1g"})
    assert got["on_host_maintenance"] == ["MIGRATE", "TERMINATE"]
    # Without groups the top-level shape decides, as before; spot is always TERMINATE.
    two_gpus = render({"node_count": 2, "gpus_per_node": 1})
    assert two_gpus["on_host_maintenance"] == ["TERMINATE"] * 2
    assert render({"node_count": 2})["on_host_maintenance"] == ["MIGRATE"] * 2
    assert render({"node_count": 2}, spot=True)["on_host_maintenance"] == ["TERMINATE"] * 2


def test_rendezvous_uri_schemes() -> None:
    for cloud, scheme in (("aws", "s3"), ("gcp", "gs"), ("azure", "az"), ("alibaba", "oss")):
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
    "aws_internet_gateway",
    "aws_egress_only_internet_gateway",
    "aws_nat_gateway",
    "aws_eip",
    "google_compute_router_nat",
    "google_compute_address",
    "google_compute_global_address",
    "azurerm_public_ip",
    "azurerm_public_ip_prefix",
    "azurerm_nat_gateway",
    "alicloud_eip",
    "alicloud_eip_address",
    "alicloud_eip_association",
    "alicloud_nat_gateway",
    "alicloud_snat_entry",
    "alicloud_common_bandwidth_package",
}


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
        if t == "alicloud_instance":
            # 0 Mbit/s of public bandwidth: ECS allocates no public IP.
            assert body["internet_max_bandwidth_out"] == 0, n
            assert "allocate_public_ip" not in body, n
