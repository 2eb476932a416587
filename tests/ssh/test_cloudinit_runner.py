"""The cloud-init runner refuses what it does not emulate (fast, no hosts needed):
a directive it skipped would make tests/ssh/test_cloud_user_data.py pass on a
document that does more on a real VM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from testbeds import sshhosts
from testbeds.cloudinit import SshMachine, Unit, Unsupported, VmHost, parse

UNIT_FILE = (
    Path(__file__).resolve().parents[2] / "packer" / "cloud" / "files" / "syndeo-node.service"
)
ENV_FILE = "/etc/syndeo/node.env"


def _vm(tmp_path: Path) -> VmHost:
    host = sshhosts.SshHost(name="h1", ip="10.0.0.1", netns="n", veth="v", host_key="k")
    bed = sshhosts.Bed(base=tmp_path, tag="t", bridge="b", host_ip="10.0.0.254", hosts=[host])
    unit = Unit.load(UNIT_FILE)
    return VmHost(SshMachine(bed, host), {unit.name: unit})


def _doc(**keys: Any) -> str:
    return "#cloud-config\n" + yaml.safe_dump(keys)


def test_the_baked_unit_is_understood() -> None:
    unit = Unit.load(UNIT_FILE)
    assert (unit.name, unit.exec_start, unit.environment_file) == (
        "syndeo-node",
        "/usr/local/libexec/syndeo-node",
        ENV_FILE,
    )
    assert unit.user == "syndeo" and unit.timeout_stop_s == 60
    # Run as systemd runs it, without the "+" (the bed runs every command as its user).
    assert unit.exec_stop_post == "/usr/local/libexec/syndeo-node-stopped"


@pytest.mark.parametrize(
    "text",
    [
        "#!/bin/sh\necho hi\n",  # a shell-script user-data
        _doc(packages=["htop"]),
        _doc(bootcmd=[["touch", "/x"]]),
        _doc(write_files=[], users=[]),
    ],
)
def test_documents_it_cannot_run_are_refused(text: str) -> None:
    with pytest.raises(Unsupported):
        parse(text)


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "/etc/other.conf", "content": "x"},  # no emulated unit reads it
        {"path": ENV_FILE, "content": "eA==", "encoding": "b64"},
        {"path": ENV_FILE, "content": "x", "append": True},
        {"path": ENV_FILE, "content": "x", "defer": True},
        {"path": ENV_FILE, "content": "x", "owner": "nobody:nogroup"},
    ],
)
def test_write_files_it_cannot_honour_are_refused(entry: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(Unsupported):
        _vm(tmp_path).run_user_data(_doc(write_files=[entry]))
    assert not (tmp_path / "hosts").exists(), "refused, yet something was written"


@pytest.mark.parametrize(
    "cmd",
    [
        "systemctl start syndeo-node",  # a shell string
        ["systemctl", "enable", "--now", "syndeo-node"],
        ["systemctl", "start", "--no-block", "other"],
        ["systemctl", "start", "syndeo-node", "other"],
        ["sh", "-c", "true"],
    ],
)
def test_runcmd_it_cannot_honour_is_refused(cmd: Any, tmp_path: Path) -> None:
    with pytest.raises(Unsupported):
        _vm(tmp_path).run_user_data(_doc(runcmd=[cmd]))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("KillMode=mixed", "KillMode=control-group"),
        ("Restart=no", "Restart=on-failure"),
        ("Type=simple", "Type=forking"),
        ("[Service]\n", "[Service]\nExecStartPre=/bin/true\n"),
        ("ExecStopPost=+/usr/local/libexec/syndeo-node-stopped", "ExecStopPost=/bin/sh -c true"),
    ],
)
def test_unit_settings_it_does_not_emulate_are_refused(old: str, new: str, tmp_path: Path) -> None:
    text = UNIT_FILE.read_text()
    assert old in text
    unit = tmp_path / "syndeo-node.service"
    unit.write_text(text.replace(old, new))
    with pytest.raises(Unsupported):
        Unit.load(unit)
