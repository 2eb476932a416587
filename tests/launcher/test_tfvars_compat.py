"""A cluster started by an older launcher can still be taken down, grown and shrunk: its
saved tfvars are brought to today's shape (syndeo/launcher/targets/tfvars_compat.py)
before today's modules are applied to them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from syndeo.core.nodeconfig import ClusterOptions
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets import get_target
from syndeo.launcher.targets.terraform import TerraformTarget
from syndeo.launcher.targets.tfvars_compat import current_tfvars
from tests.support.launched import make_launched


def _today() -> tuple[TerraformTarget, dict[str, Any]]:
    cfg = load_config(
        target="aws",
        dashboard=True,
        aws={"instance_type": "c7i.2xlarge", "region": "us-east-1", "image": "ami-0abc"},
        groups=[
            {"name": "cpu", "nodes": 2},
            {"name": "gpu", "nodes": 1, "gpus_per_node": 1, "aws": {"instance_type": "g5.xlarge"}},
        ],
    )
    target = get_target(cfg)
    assert isinstance(target, TerraformTarget)
    spec = ClusterSpec.from_config(cfg, "s3://syndeo-0123456789ab/syndeo", "compat")
    tfvars = target.tfvars(spec)
    tfvars["node"]["grown"] = [{"rank": 4, "group": "gpu"}]  # as grow writes it
    return target, tfvars


# The node settings of the older launchers (today's ClusterOptions has more).
_THEN = ("dashboard",)


def _node_object_shape(today: dict[str, Any]) -> dict[str, Any]:
    """What the launcher wrote between b367dd6 and ClusterOptions: node.dashboard."""
    old = copy.deepcopy(today)
    settings = old["node"].pop("settings")
    # Only what existed then; a setting added since is absent (the module's default).
    old["node"].update({k: v for k, v in settings.items() if k in _THEN})
    return old


def _flat_shape(today: dict[str, Any]) -> dict[str, Any]:
    """What the launcher wrote before b367dd6: every node setting a variable of its own,
    the cluster id as cluster_name, a group's instance type in its groups entry."""
    old = _node_object_shape(today)
    node = old.pop("node")
    node["cluster_name"] = node.pop("cluster_id")
    types = old.pop("group_instance_types")
    node["groups"] = [{**g, "instance_type": types.get(g["name"])} for g in node["groups"]]
    return {**old, **node}


def _set(tfvars: dict[str, Any]) -> dict[str, Any]:
    """``tfvars`` without what is left unset or at its default (the module then reads the
    default), which an attribute or setting added later leaves in today's tfvars and not
    in an older launcher's."""
    out = copy.deepcopy(tfvars)
    node = {k: v for k, v in out["node"].items() if v is not None}
    defaults = {n: f.default for n, f in ClusterOptions.model_fields.items()}
    node["settings"] = {
        k: v for k, v in node["settings"].items() if v is not None and v != defaults.get(k)
    }
    node["groups"] = [{k: v for k, v in g.items() if v is not None} for g in node["groups"]]
    out["node"] = node
    return out


def test_both_older_shapes_become_todays() -> None:
    _, today = _today()
    assert today["node"]["settings"]["dashboard"] is True
    assert today["group_instance_types"] == {"gpu": "g5.xlarge"}
    for old in (_node_object_shape(_set(today)), _flat_shape(_set(today))):
        assert _set(current_tfvars(old)) == _set(today)
    assert current_tfvars(today) == today  # today's shape passes unchanged


def test_down_rewrites_an_old_clusters_tfvars_before_terraform_reads_them(
    tmp_path: Path,
) -> None:
    target, today = _today()
    workspace = tmp_path / "terraform"
    workspace.mkdir()
    (workspace / "terraform.tfvars.json").write_text(json.dumps(_flat_shape(_set(today))))
    launched = make_launched(
        "aws",
        "compat",
        "s3://syndeo-0123456789ab/syndeo",
        part={"module_dir": str(tmp_path / "module"), "workspace": str(workspace)},
    )
    tf, tfvars = target._saved_vars(launched)
    assert _set(tfvars) == _set(today)
    assert json.loads(tf.ws.tfvars.read_text()) == tfvars
    assert tf.ws.tfvars.stat().st_mode & 0o777 == 0o600
