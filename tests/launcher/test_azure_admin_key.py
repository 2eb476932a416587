"""Azure: no admin SSH private key anywhere in Terraform.

terraform/azure generated the VMs' admin key with ``tls_private_key``, whose private
half Terraform keeps in the state.  The module now takes only a public key, and the
azure target passes one whose private half it never keeps.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from syndeo.launcher.config import DeployConfig
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets import get_target

AZURE = Path(__file__).resolve().parents[2] / "terraform" / "azure"
IMAGE = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/syndeo"


def _code(path: Path) -> str:
    return "\n".join(ln.split("#", 1)[0] for ln in path.read_text().splitlines())


def test_the_azure_module_generates_no_key() -> None:
    code = "\n".join(_code(p) for p in AZURE.rglob("*.tf"))
    assert not re.search(r'resource\s+"tls_', code), "a key made in Terraform lives in its state"
    assert "hashicorp/tls" not in code
    assert re.search(r"public_key\s*=\s*var\.admin_ssh_public_key\b", code)


def _tfvars(monkeypatch: pytest.MonkeyPatch, **azure: str) -> dict[str, object]:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "syndeo0123")
    cfg = DeployConfig.model_validate(
        {
            "target": "azure",
            "nodes": 2,
            "azure": {
                "instance_type": "Standard_D8s_v5",
                "region": "westeurope",
                "image": IMAGE,
                **azure,
            },
        }
    )
    target = get_target(cfg)
    spec = ClusterSpec.from_config(cfg, "az://syndeo-0123456789ab/syndeo", "azure-key")
    first = target.tfvars(spec)  # type: ignore[attr-defined]
    assert target.tfvars(spec) == first  # one key per launch: no VM replaced for a new one
    return dict(first)


def test_the_target_passes_a_public_key_whose_private_half_it_never_kept(
    syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tfvars = _tfvars(monkeypatch)
    key = str(tfvars["admin_ssh_public_key"])
    loaded = serialization.load_ssh_public_key(key.encode())
    assert key.startswith("ssh-ed25519 ") and loaded is not None
    text = repr(tfvars)
    assert "PRIVATE KEY" not in text
    # Nothing of it on disk either.
    written = [p for p in syndeo_home.rglob("*") if p.is_file()]
    assert not [p for p in written if "PRIVATE KEY" in p.read_text(errors="replace")]
    # A fresh target (another launch) gets another key.
    assert _tfvars(monkeypatch)["admin_ssh_public_key"] != key


def test_a_configured_key_is_passed_as_is(
    syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDqzMine"
    assert _tfvars(monkeypatch, admin_ssh_public_key=mine)["admin_ssh_public_key"] == mine
    assert os.environ["AZURE_STORAGE_ACCOUNT"] == "syndeo0123"
