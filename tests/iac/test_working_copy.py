"""Terraform runs a cluster's module from a copy in the cluster's own state dir, never
in the installed package (read only, shared by every cluster): ``terraform init`` writes
into its working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from syndeo.launcher.targets.terraform import terraform_root, working_copy
from syndeo.launcher.targets.tfexec import Terraform, Workspace


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_terraform_runs_a_copy_in_the_cluster_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the plugin cache: this test's
    root = terraform_root()
    before = _files(root)
    cluster = tmp_path / "cluster" / "terraform"
    ws = Workspace(working_copy(root / "ssh", cluster / "source"), cluster)
    assert ws.module_dir == ws.source_dir / "ssh"
    # Its neighbours by relative path come along; what no run needs does not.
    assert (ws.source_dir / "modules" / "node" / "templates" / "start.sh.tftpl").is_file()
    assert not (ws.source_dir / "modules" / "node" / "tests").exists()
    assert not list(ws.source_dir.rglob("*.md"))
    assert (ws.module_dir / "on-host.sh").stat().st_mode & 0o111  # Terraform runs it
    Terraform(ws).init()  # the ssh root has no provider: init needs no download
    assert (ws.data_dir / "modules" / "modules.json").is_file()
    assert _files(root) == before, "terraform init wrote into the package's terraform/"
    ws.forget()  # after a clean destroy
    assert not ws.source_dir.exists()
