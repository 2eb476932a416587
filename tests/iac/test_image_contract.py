"""What packer/cloud bakes into the VM image is what the cloud modules' user-data
expects: the unit it starts, the environment file it writes, the start script, the
service user and the SIF path.  Both sides are read from the files: the image side
from packer/cloud (unit file, provision.sh, build.pkr.hcl), the user-data side from
terraform/modules/node rendered by the real terraform and from the cloud modules'
variables.  (`packer validate` of the cloud sources is tests/apptainer/test_packer.py.)
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from syndeo.image.inputs import REPO
from tests.support import hcl

CLOUD = REPO / "packer" / "cloud"
PROVISION = (CLOUD / "files" / "provision.sh").read_text()


def _unit() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    unit.read_string((CLOUD / "files" / "syndeo-node.service").read_text())
    return unit["Service"]


def _installed(source: str) -> str:
    """Where provision.sh installs a file it got from the build (``$BAKE/<source>``)."""
    m = re.search(
        rf'^install\s+(?:-\S+\s+\S+\s+)*"\$BAKE/{re.escape(source)}"\s+(\S+)\s*$', PROVISION, re.M
    )
    assert m, f"provision.sh does not install {source}"
    return m.group(1)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """terraform/modules/node's outputs for a 2-node cluster with its defaults (what the
    cloud modules pass: their image_path; they leave env_file_path, service_name and python
    alone)."""
    root = tmp_path_factory.mktemp("render")
    image_path = hcl.unquote(hcl.variables(hcl.TERRAFORM / "aws")["image_path"]["default"])
    shutil.copytree(hcl.TERRAFORM / "modules" / "node", root / "node")
    (root / "main.tf").write_text(
        'module "nodes" {\n'
        '  source = "./node"\n'
        '  node = { cluster_id = "contract", node_count = 2, rendezvous = "s3://bucket/syndeo",\n'
        f'    target = "aws", image_path = "{image_path}" }}\n'
        "}\n"
        'output "user_data" {\n  value = module.nodes.user_data\n}\n'
        'output "env" {\n  value = module.nodes.env\n}\n'
    )
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(root / ".terraform")}
    for args in (("init", "-backend=false"), ("apply", "-auto-approve", "-no-color")):
        out = hcl.run_tf(*args, cwd=root, env=env)
        assert out.returncode == 0, out.stdout + out.stderr
    out = hcl.run_tf("output", "-json", cwd=root, env=env)
    assert out.returncode == 0, out.stderr
    return {k: v["value"] for k, v in json.loads(out.stdout).items()}


def _cloud_config(rendered: dict[str, Any], rank: int) -> dict[str, Any]:
    text = rendered["user_data"][rank]
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def test_env_file_path(rendered: dict[str, Any]) -> None:
    written = [f["path"] for f in _cloud_config(rendered, 0)["write_files"]]
    assert written == [_unit()["EnvironmentFile"]]
    assert _unit()["EnvironmentFile"] == "/etc/syndeo/node.env"


def test_started_unit_is_the_baked_unit(rendered: dict[str, Any]) -> None:
    runcmd = _cloud_config(rendered, 1)["runcmd"]
    started = [c[-1] for c in runcmd if c[:2] == ["systemctl", "start"]]
    unit_path = _installed("syndeo-node.service")
    assert unit_path == "/etc/systemd/system/syndeo-node.service"
    assert started == [Path(unit_path).stem] == ["syndeo-node"]


def test_start_script(rendered: dict[str, Any]) -> None:
    assert _unit()["ExecStart"] == _installed("syndeo-node") == "/usr/local/libexec/syndeo-node"
    # The image bakes the very script the node module ships (one start script).
    build = (CLOUD / "build.pkr.hcl").read_text()
    assert '"${path.root}/../../terraform/modules/node/files/syndeo-node"' in build
    assert (hcl.TERRAFORM / "modules" / "node" / "files" / "syndeo-node").is_file()


def test_power_off_script() -> None:
    """The unit runs the node module's power-off script as root once the node has gone
    (autostop with no watcher: syndeo/node/poweroff.py), and the image bakes that script."""
    installed = _installed("syndeo-node-stopped")
    assert _unit()["ExecStopPost"] == "+" + installed == "+/usr/local/libexec/syndeo-node-stopped"
    build = (CLOUD / "build.pkr.hcl").read_text()
    assert '"${path.root}/../../terraform/modules/node/files/syndeo-node-stopped"' in build
    assert (hcl.TERRAFORM / "modules" / "node" / "files" / "syndeo-node-stopped").is_file()


def test_service_user() -> None:
    user = _unit()["User"]
    assert user == "syndeo"
    assert re.search(rf"useradd\b[^\n]*\\\n?[^\n]*\b{user}\s*$", PROVISION, re.M), (
        f"provision.sh does not create the unit's user {user!r}"
    )


def test_sif_path(rendered: dict[str, Any]) -> None:
    baked = _installed("$SIF_NAME")
    assert baked == "/opt/syndeo/syndeo.sif"
    assert {e["SYNDEO_IMAGE"] for e in rendered["env"]} == {baked}
    for cloud in hcl.CLOUDS:
        default = hcl.unquote(hcl.variables(hcl.TERRAFORM / cloud)["image_path"]["default"])
        assert default == baked, f"terraform/{cloud} image_path default {default!r}"


def test_image_runs_cloud_init() -> None:
    """The user-data is a cloud-config document: the image must have cloud-init (Debian's
    AWS and Azure images do; its GCE images do not, so provision.sh installs it)."""
    assert re.search(r"^\$APT install\b[^\n]*\bcloud-init\b", PROVISION, re.M)
