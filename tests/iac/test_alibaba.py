"""terraform/alibaba checked offline: what checkov (no check on alicloud_instance) and
`terraform validate` (the alicloud provider cannot be downloaded here) cannot.

The node module's call, the module's own locals and its RAM policy are evaluated by the
real terraform with the module's variables.tf checking the inputs; the user-data it
renders goes through `cloud-init schema`; the rest is read from the HCL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl
from tests.support.tfvars import BASE

TF = hcl.TERRAFORM / "alibaba"


def _resources() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (t, n): body for f in hcl.tf_files(TF) if f.parent == TF for t, n, body in hcl.resources(f)
    }


def _locals(name: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for block in hcl.load(TF / name).get("locals", []):
        merged.update(hcl.unquote(block))
    return merged


def _render(root: Path, tfvars: dict[str, Any]) -> dict[str, Any]:
    """module.nodes' user-data and env, and the RAM policy, as terraform/alibaba makes them."""
    shutil.copytree(hcl.TERRAFORM / "modules" / "node", root / "modules" / "node")
    work = root / "alibaba"
    work.mkdir()
    shutil.copy2(TF / "variables.tf", work / "variables.tf")
    locals_ = {**_locals("main.tf"), **_locals("iam.tf")}
    locals_["bucket"] = "${var.bucket_name}"  # the created bucket's name is the same
    [call] = [b['"nodes"'] for b in hcl.load(TF / "main.tf")["module"] if '"nodes"' in b]
    call = {k: v for k, v in hcl.unquote(call).items()}
    outputs: dict[str, Any] = {
        k: {"value": f"${{module.nodes.{k}}}", "sensitive": True} for k in ("user_data", "env")
    }
    outputs["policy"] = {"value": "${local.rendezvous_policy}"}
    doc = {"locals": locals_, "module": {"nodes": call}, "output": outputs}
    (work / "main.tf.json").write_text(json.dumps(doc, indent=2))
    (work / "terraform.tfvars.json").write_text(json.dumps(tfvars))
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(work / ".terraform")}
    for cmd in (("init", "-backend=false"), ("apply", "-auto-approve", "-no-color")):
        out = hcl.run_tf(*cmd, cwd=work, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
    out = hcl.run_tf("output", "-json", cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    return {k: v["value"] for k, v in json.loads(out.stdout).items()}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tfvars = {
        **BASE["alibaba"],
        "node": {"cluster_id": "ali-1", "node_count": 2},
        "bucket_name": "syndeo-ali-test",
        "spot": True,
    }
    return _render(tmp_path_factory.mktemp("alibaba"), tfvars)


def test_user_data_passes_cloud_init_schema(rendered: dict[str, Any], tmp_path: Path) -> None:
    assert len(rendered["user_data"]) == 2
    for rank, doc in enumerate(rendered["user_data"]):
        path = tmp_path / f"user-data-{rank}.yaml"
        path.write_text(doc)
        res = subprocess.run(
            ["cloud-init", "schema", "--config-file", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0 and "Valid cloud-config" in res.stdout, res.stdout + res.stderr


def test_nodes_are_told_the_oss_endpoint_role_and_spot_notices(rendered: dict[str, Any]) -> None:
    for env in rendered["env"]:
        assert env["SYNDEO_TARGET"] == "alibaba"
        assert env["SYNDEO_RENDEZVOUS"] == "oss://syndeo-ali-test/syndeo"
        assert env["SYNDEO_SPOT_NOTICES"] == "alibaba"
        # The region's internal endpoint: reachable without NAT or a public IP.
        assert env["SYNDEO_OSS_ENDPOINT"] == "https://s3.oss-cn-hangzhou-internal.aliyuncs.com"
        assert env["ALIBABA_CLOUD_REGION"] == "cn-hangzhou"
        assert env["ALIBABA_CLOUD_ECS_METADATA"] == "syndeo-ali-1-nodes"


def test_node_role_may_touch_only_its_clusters_prefix(rendered: dict[str, Any]) -> None:
    statements = rendered["policy"]["Statement"]
    actions = sorted(a for s in statements for a in s["Action"])
    assert actions == ["oss:DeleteObject", "oss:GetObject", "oss:ListObjects", "oss:PutObject"]
    assert all(s["Effect"] == "Allow" and "*" not in "".join(s["Action"]) for s in statements)
    [listing] = [s for s in statements if s["Action"] == ["oss:ListObjects"]]
    assert listing["Resource"] == ["acs:oss:*:*:syndeo-ali-test"]
    assert listing["Condition"] == {"StringLike": {"oss:Prefix": ["syndeo/ali-1/*"]}}
    [objects] = [s for s in statements if s is not listing]
    assert objects["Resource"] == ["acs:oss:*:*:syndeo-ali-test/syndeo/ali-1/*"]


def test_instances_are_private_hardened_and_keyed_by_rank() -> None:
    vm = _resources()[("alicloud_instance", "node")]
    assert vm["for_each"] == "${local.machines}"
    assert vm["internet_max_bandwidth_out"] == 0  # no public IP
    assert hcl.unquote(vm["http_tokens"]) == "required"  # metadata only with a token
    assert hcl.unquote(vm["http_endpoint"]) == "enabled"
    assert vm["system_disk_encrypted"] is True
    assert vm["spot_strategy"] == '${var.spot ? "SpotAsPriceGo" : "NoSpot"}'
    role = "${var.node_role != null ? var.node_role : alicloud_ram_role.nodes[0].role_name}"
    assert vm["role_name"] == role
    assert vm["security_groups"] == ["${alicloud_security_group.nodes.id}"]
    assert "syndeo-rank" in str(vm["tags"]) and vm["volume_tags"] == "${local.tags}"


def test_security_group_admits_only_members_and_admin_ranges() -> None:
    found = _resources()
    sg = found[("alicloud_security_group", "nodes")]
    assert hcl.unquote(sg["inner_access_policy"]) == "Drop"
    rules = {n: b for (t, n), b in found.items() if t == "alicloud_security_group_rule"}
    assert set(rules) == {"ray", "admin_ssh"}
    assert rules["ray"]["source_security_group_id"] == "${alicloud_security_group.nodes.id}"
    assert "cidr_ip" not in rules["ray"]
    assert rules["admin_ssh"]["for_each"] == "${toset(var.admin_cidrs)}"


def test_bucket_private_encrypted_and_old_versions_expire() -> None:
    found = _resources()
    bucket = found[("alicloud_oss_bucket", "rendezvous")]
    assert bucket["force_destroy"] is True
    [sse] = bucket["server_side_encryption_rule"]
    assert hcl.unquote(sse["sse_algorithm"]) == "AES256"
    [aborts] = bucket["lifecycle_rule"]
    assert hcl.unquote(aborts["id"]) == "abort-incomplete-uploads"
    # Old versions go only when versioning is on: OSS takes no rule without an action.
    [versions] = [d['"lifecycle_rule"'] for d in bucket["dynamic"] if '"lifecycle_rule"' in d]
    assert versions["for_each"] == "${var.bucket_versioning ? [1] : []}"
    [content] = versions["content"]
    assert hcl.unquote(content["id"]) == "expire-old-versions"
    assert content["prefix"] == '${local.prefix == "" ? "" : "${local.prefix}/"}'
    [expiry] = content["noncurrent_version_expiration"]
    assert expiry["days"] == 1
    assert "expiration" not in content
    assert hcl.unquote(found[("alicloud_oss_bucket_acl", "rendezvous")]["acl"]) == "private"
    assert (
        found[("alicloud_oss_bucket_public_access_block", "rendezvous")]["block_public_access"]
        is True
    )


def test_everything_that_takes_tags_is_tagged() -> None:
    untagged = {"alicloud_security_group_rule", "alicloud_ram_policy"}
    untagged |= {"alicloud_ram_role_policy_attachment", "alicloud_oss_bucket_acl"}
    untagged |= {"alicloud_oss_bucket_public_access_block"}
    for (t, n), body in _resources().items():
        if t not in untagged:
            assert "local.tags" in str(body.get("tags")), f"{t}.{n} has no tags"


def test_zone_is_the_first_offering_every_type(tmp_path: Path) -> None:
    """network.tf's own locals, evaluated by terraform with the zones data source's
    answer (its ``ids``) stood in for: the first zone by id offering every type, the
    given zone as is, null (the vSwitch's precondition then names the types) if none."""
    locals_ = _locals("network.tf")
    fake = "local.offering"
    body = {k: str(v).replace("data.alicloud_zones.offering", fake) for k, v in locals_.items()}
    assert fake in body["zones_offering_all"]
    shutil.copy2(TF / "variables.tf", tmp_path / "variables.tf")
    doc = {
        "locals": {**body, "offering": "${var.offering}"},
        "variable": {"offering": {"type": "map(object({ids = list(string)}))"}},
        "output": {"zone": {"value": "${local.zone}"}},
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(doc))
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    assert hcl.run_tf("init", "-backend=false", cwd=tmp_path, env=env).returncode == 0

    def zone(offering: dict[str, list[str]], **tfvars: Any) -> Any:
        values = {
            **BASE["alibaba"],
            "node": {"cluster_id": "z1", "node_count": 2, **tfvars.pop("node", {})},
            "bucket_name": "syndeo-z1",
            "offering": {t: {"ids": ids} for t, ids in offering.items()},
            **tfvars,
        }
        (tmp_path / "t.tfvars.json").write_text(json.dumps(values))
        out = hcl.run_tf(
            "apply", "-auto-approve", "-no-color", "-var-file=t.tfvars.json", cwd=tmp_path, env=env
        )
        assert out.returncode == 0, out.stdout + out.stderr
        out = hcl.run_tf("output", "-json", cwd=tmp_path, env=env)
        # A null output is not kept in the state: absent from the JSON.
        return json.loads(out.stdout).get("zone", {}).get("value")

    top = BASE["alibaba"]["instance_type"]
    assert zone({top: ["cn-hangzhou-k", "cn-hangzhou-h"]}) == "cn-hangzhou-h"
    groups = [
        {"name": "head", "nodes": 1, "cpus": 2, "gpus": 0},
        {"name": "gpu", "nodes": 1, "cpus": 8, "gpus": 1},
    ]
    gpu = "ecs.gn7i-c8g1.2xlarge"
    both = {top: ["cn-hangzhou-h", "cn-hangzhou-k"], gpu: ["cn-hangzhou-k"]}
    node = {"node_count": 2, "groups": groups}
    assert zone(both, node=node, group_instance_types={"gpu": gpu}) == "cn-hangzhou-k"
    none = {top: ["cn-hangzhou-h"], gpu: ["cn-hangzhou-k"]}
    assert zone(none, node=node, group_instance_types={"gpu": gpu}) is None
    assert zone({}, zone="cn-hangzhou-j") == "cn-hangzhou-j"
