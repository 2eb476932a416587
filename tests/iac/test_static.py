"""Formatting and checkov over the three cloud modules (offline, a few seconds each)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from syndeo.image.inputs import REPO
from tests.support import hcl

CHECKOV = REPO / ".venv-iac" / "bin" / "checkov"
SKIP = re.compile(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?")


def test_terraform_fmt() -> None:
    out = hcl.run_tf("fmt", "-check", "-recursive", "-diff", "terraform", cwd=REPO)
    assert out.returncode == 0, f"terraform fmt would change:\n{out.stdout}{out.stderr}"


def _checkov(folder: Path) -> list[dict[str, Any]]:
    assert CHECKOV.exists(), f"{CHECKOV} missing: run scripts/setup.d/iac.sh (scripts/setup --all)"
    env = {
        **os.environ,
        "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true",  # stay offline
        "BC_SKIP_MAPPING": "TRUE",
        "LOG_LEVEL": "WARNING",
    }
    out = subprocess.run(
        [
            str(CHECKOV),
            "-d",
            str(folder),
            "--framework",
            "terraform",
            "--skip-download",
            "-o",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.strip(), f"checkov printed nothing: {out.stderr[-2000:]}"
    report = json.loads(out.stdout)
    return report if isinstance(report, list) else [report]


@pytest.mark.tools
@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_checkov_clean(cloud: str) -> None:
    reports = _checkov(hcl.TERRAFORM / cloud)
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range']})"
        for r in reports
        for c in r["results"]["failed_checks"]
    ]
    parse_errors = [e for r in reports for e in r["results"].get("parsing_errors", [])]
    passed = sum(r["summary"]["passed"] for r in reports)
    assert not parse_errors, f"checkov could not parse {parse_errors} (it exits 0 on those)"
    assert not failed, "checkov failed:\n" + "\n".join(failed)
    if cloud == "alibaba":
        # checkov 3.3.30 has a few Alibaba checks (security group rules, OSS) and none
        # on alicloud_instance: tests/iac/test_alibaba.py checks the instance itself.
        ids = {c["check_id"] for r in reports for c in r["results"]["passed_checks"]}
        assert {"CKV_ALI_1", "CKV_ALI_2", "CKV_ALI_3"} <= ids, sorted(ids)
        return
    assert passed > 20, f"checkov passed only {passed} checks: did it scan the module?"
    # The VMs are for_each over ranks only known at apply, so checkov scans each VM
    # resource once (unexpanded) rather than once per rank: it must still be scanned.
    vm = {
        "aws": "aws_instance",
        "gcp": "google_compute_instance",
        "azure": "azurerm_linux_virtual_machine",
    }[cloud]
    vm_checks = {
        c["check_id"]
        for r in reports
        for c in r["results"].get("passed_checks", [])
        if c["resource"].split("[")[0].endswith(f"{vm}.node")
    }
    assert len(vm_checks) >= 5, f"checkov scanned {vm}.node with only {sorted(vm_checks)}"


@pytest.mark.parametrize("cloud", hcl.CLOUDS)
def test_checkov_skips_have_reasons(cloud: str) -> None:
    for path in hcl.tf_files(hcl.TERRAFORM / cloud):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if m := SKIP.search(line):
                reason = (m.group(2) or "").strip()
                assert len(reason) >= 20, f"{path}:{n}: skip {m.group(1)} needs a real reason"


@pytest.mark.tools
def test_checkov_catches_a_public_instance(tmp_path: Path) -> None:
    """Guards test_checkov_clean: the same invocation reports a real failure."""
    (tmp_path / "main.tf").write_text(
        'resource "aws_instance" "x" {\n'
        '  ami                         = "ami-12345678"\n'
        '  instance_type               = "t3.micro"\n'
        "  associate_public_ip_address = true\n"
        "}\n"
    )
    ids = {c["check_id"] for r in _checkov(tmp_path) for c in r["results"]["failed_checks"]}
    assert {"CKV_AWS_88", "CKV_AWS_79", "CKV_AWS_8"} <= ids
