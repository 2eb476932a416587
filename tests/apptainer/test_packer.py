"""Packer 1.6.6 (Debian's): every source validates and the templates are formatted.

1.6.6 rejects the ``required_plugins`` block, so every validation here runs on a copy of
``packer/cloud`` without ``plugins.pkr.hcl`` (its own file for that reason); that file
is checked on its own below.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from syndeo.image.inputs import REPO

PACKER = REPO / "packer"
# alicloud-ecs (bundled with 1.6.6) refuses to validate without an AccessKey: the
# template's defaults read these (never a real key here).
ENV = {
    **os.environ,
    "CHECKPOINT_DISABLE": "1",
    "ALIBABA_CLOUD_ACCESS_KEY_ID": "validate-only",
    "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "validate-only",
}


def _packer(*args: str, cwd: Path = PACKER) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["packer", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120
    )


@pytest.mark.tools
def test_local_build_validates() -> None:
    out = _packer("validate", "-var", 'sif_command=["true"]', "local")
    assert out.returncode == 0, out.stdout + out.stderr


CLOUDS = [
    ("aws", "amazon-ebs"),
    ("gcp", "googlecompute"),
    ("azure", "azure-arm"),
    ("alibaba", "alicloud-ecs"),
]


def _checkout(root: Path) -> Path:
    """The parts of a checkout the cloud build reads, under ``root``: packer/cloud (less
    plugins.pkr.hcl), the node module's scripts (the unit's start and stop), and a
    stand-in SIF + manifest where `invoke build` writes them (never the real
    checkout's .syndeo/)."""
    shutil.copytree(PACKER / "cloud", root / "packer" / "cloud")
    (root / "packer" / "cloud" / "plugins.pkr.hcl").unlink()
    files = Path("terraform") / "modules" / "node" / "files"
    shutil.copytree(REPO / files, root / files)
    images = root / ".syndeo" / "image"
    images.mkdir(parents=True)
    (images / "syndeo-debootstrap.sif").write_bytes(b"stand-in: validate checks it exists")
    (images / "syndeo-debootstrap.sif.manifest.json").write_text('{"sha256": "ab"}')
    return root


@pytest.mark.tools
@pytest.mark.parametrize(("cloud", "source"), CLOUDS)
def test_documented_command_validates(cloud: str, source: str, tmp_path: Path) -> None:
    """The command packer/README.md and the example's header give, as written: from the
    repository root, the SIF `invoke build` wrote found without naming it (a path in
    the example resolved against the current directory once and failed: Bad source).
    Azure without a client id: the `az login` session (use_azure_cli_auth)."""
    root = _checkout(tmp_path)
    example = (PACKER / "cloud" / "examples" / f"{cloud}.pkrvars.hcl").read_text()
    documented = f"-only={source}.syndeo -var-file=packer/cloud/examples/{cloud}.pkrvars.hcl"
    assert f"packer build {documented} packer/cloud" in example
    assert f"packer build {documented} packer/cloud" in (PACKER / "README.md").read_text()
    out = _packer("validate", *documented.split(), "packer/cloud", cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    # …and from anywhere else, e.g. the examples folder.
    out = _packer(
        "validate",
        f"-only={source}.syndeo",
        f"-var-file={cloud}.pkrvars.hcl",
        "..",
        cwd=root / "packer" / "cloud" / "examples",
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.tools
@pytest.mark.parametrize(("cloud", "source"), CLOUDS)
def test_cloud_source_validates_with_a_given_sif(cloud: str, source: str, tmp_path: Path) -> None:
    root = _checkout(tmp_path / "co")
    sif = tmp_path / "syndeo.sif"
    sif.write_bytes(b"stand-in: validate only checks the file exists")
    Path(f"{sif}.manifest.json").write_text("{}")
    out = _packer(
        "validate",
        f"-only={source}.syndeo",
        f"-var-file=examples/{cloud}.pkrvars.hcl",
        "-var",
        f"sif_path={sif}",
        "-var",
        "azure_client_id=app",
        "-var",
        "azure_client_secret=validate-only",
        ".",
        cwd=root / "packer" / "cloud",
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.tools
def test_cloud_source_without_its_settings_fails_validation(tmp_path: Path) -> None:
    """Guards the tests above: -only must really select the source (an unmatched -only
    validates nothing and passes)."""
    root = _checkout(tmp_path)
    out = _packer("validate", "-only=googlecompute.syndeo", "packer/cloud", cwd=root)
    assert out.returncode != 0
    assert "project_id" in out.stdout + out.stderr
    # alicloud-ecs without an AccessKey (the template's default is the environment's).
    env = {k: v for k, v in ENV.items() if not k.startswith(("ALIBABA_", "ALICLOUD_"))}
    out = subprocess.run(
        ["packer", "validate", "-only=alicloud-ecs.syndeo", "packer/cloud"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "ALICLOUD_ACCESS_KEY" in out.stdout + out.stderr


def test_required_plugins_name_every_builder() -> None:
    """Packer >= 1.7 bundles no cloud builder: plugins.pkr.hcl names the four this
    folder uses, and the README says to `packer init` first."""
    text = (PACKER / "cloud" / "plugins.pkr.hcl").read_text()
    for plugin in ("amazon", "googlecompute", "azure", "alicloud"):
        assert re.search(rf'source\s*=\s*"github.com/hashicorp/{plugin}"', text), plugin
    used = set(
        re.findall(r'^source "([\w-]+)"', (PACKER / "cloud" / "sources.pkr.hcl").read_text(), re.M)
    )
    assert used == {"amazon-ebs", "googlecompute", "azure-arm", "alicloud-ecs"}
    assert "packer init packer/cloud" in (PACKER / "README.md").read_text()


def test_azure_image_is_generalized_and_fits_debians_disk() -> None:
    """Azure captures only a deprovisioned VM, and refuses an OS disk smaller than the
    30 GiB of Debian's image."""
    build = (PACKER / "cloud" / "build.pkr.hcl").read_text()
    assert re.search(
        r'only\s*=\s*\["azure-arm.syndeo"\]\n.*\n\s*inline\s*=\s*\["/usr/sbin/waagent '
        r'-force -deprovision\+user"',
        build,
    )
    variables = (PACKER / "cloud" / "variables.pkr.hcl").read_text()
    default = re.search(r'variable "disk_size_gb" \{[^}]*default\s*=\s*(\d+)', variables)
    assert default is not None and int(default.group(1)) >= 30


@pytest.mark.tools
@pytest.mark.parametrize("folder", ["local", "cloud", "cloud/examples"])
def test_fmt_clean(folder: str) -> None:
    out = _packer("fmt", "-check", folder)
    assert out.returncode == 0, f"packer fmt would change: {out.stdout}"
