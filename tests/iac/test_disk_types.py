"""Each node's disk type follows its machine type (terraform/gcp and terraform/azure
disk.tf), evaluated by the real terraform on a provider-free copy (variables.tf +
disk.tf: the google and azurerm providers cannot be downloaded here).

GCP: series that attach Hyperdisk only (C4, N4, A4, G4, ...) get hyperdisk-balanced,
the rest pd-balanced; Azure: premium-storage-capable sizes (an ``s`` among the feature
letters) get Premium_LRS, the rest StandardSSD_LRS; ``disk_type`` overrides both.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl
from tests.support.tfvars import BASE, COMMON

# (instance_type, the disk type the module must choose)
CHOICES: dict[str, list[tuple[str, str]]] = {
    "gcp": [
        ("c3-standard-8", "pd-balanced"),
        ("n2-standard-4", "pd-balanced"),
        ("e2-medium", "pd-balanced"),
        ("g2-standard-4", "pd-balanced"),
        ("custom-8-16384", "pd-balanced"),
        ("c4-standard-8", "hyperdisk-balanced"),
        ("c4a-standard-8", "hyperdisk-balanced"),
        ("c4d-standard-8", "hyperdisk-balanced"),
        ("n4-standard-8", "hyperdisk-balanced"),
        ("a4-highgpu-8g", "hyperdisk-balanced"),
        ("a3-ultragpu-8g", "hyperdisk-balanced"),
        ("g4-standard-48", "hyperdisk-balanced"),
        ("x4-megamem-960-metal", "hyperdisk-balanced"),
    ],
    "azure": [
        ("Standard_D8s_v5", "Premium_LRS"),
        ("Standard_D8as_v5", "Premium_LRS"),
        ("Standard_D4pds_v5", "Premium_LRS"),
        ("Standard_NC4as_T4_v3", "Premium_LRS"),
        ("Standard_M128-64ms", "Premium_LRS"),
        ("Standard_B2s", "Premium_LRS"),
        ("Standard_DS2_v2", "Premium_LRS"),
        ("Standard_D8_v5", "StandardSSD_LRS"),
        ("Standard_D8a_v4", "StandardSSD_LRS"),
        ("Standard_A2_v2", "StandardSSD_LRS"),
        ("Standard_A2m_v2", "StandardSSD_LRS"),
        ("Standard_NV6", "StandardSSD_LRS"),
    ],
}
OVERRIDE = {"gcp": ("c3-standard-8", "pd-ssd"), "azure": ("Standard_D8s_v5", "Premium_ZRS")}
LOCAL = {"gcp": "boot_disk_type", "azure": "os_disk_type"}


def _tftest(cloud: str) -> tuple[str, int]:
    lines = ["variables {"]
    lines += [f"  {k} = {json.dumps(v)}" for k, v in {**COMMON, **BASE[cloud]}.items()]
    lines.append("}")
    runs: list[tuple[dict[str, Any], str, str]] = [
        ({"instance_type": t}, t, want) for t, want in CHOICES[cloud]
    ]
    # A group's own type gets its own choice (the head's group uses instance_type).
    hyper, plain = (("c4-standard-8", "hyperdisk-balanced"), ("c3-standard-8", "pd-balanced"))
    if cloud == "azure":
        hyper, plain = (("Standard_D8s_v5", "Premium_LRS"), ("Standard_D8_v5", "StandardSSD_LRS"))
    node = {
        **COMMON["node"],
        "groups": [
            {"name": "head", "nodes": 1, "cpus": 2, "gpus": 0},
            {"name": "more", "nodes": 2, "cpus": 2, "gpus": 0},
        ],
    }
    grouped = {"instance_type": plain[0], "node": node, "group_instance_types": {"more": hyper[0]}}
    runs.append((grouped, hyper[0], hyper[1]))
    runs.append((grouped, plain[0], plain[1]))
    t, forced = OVERRIDE[cloud]
    runs.append(({"instance_type": t, "disk_type": forced}, t, forced))
    for i, (variables, machine, want) in enumerate(runs):
        lines += ["", f'run "choice_{i}" {{', "  command = plan", "  variables {"]
        lines += [f"    {k} = {json.dumps(v)}" for k, v in variables.items()]
        got = f"output.disk_type[{json.dumps(machine)}]"
        lines += [
            "  }",
            "  assert {",
            f"    condition     = {got} == {json.dumps(want)}",
            f'    error_message = "{machine}: want {want}, got ${{{got}}}"',
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n", len(runs)


@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_disk_type_follows_machine_type(cloud: str, tmp_path: Path) -> None:
    for name in ("variables.tf", "disk.tf"):
        shutil.copy(hcl.TERRAFORM / cloud / name, tmp_path / name)
    (tmp_path / "main.tf").write_text(
        f'output "disk_type" {{\n  value = local.{LOCAL[cloud]}\n}}\n'
    )
    (tmp_path / "tests").mkdir()
    text, runs = _tftest(cloud)
    (tmp_path / "tests" / "disk.tftest.hcl").write_text(text)
    env = {**hcl.TF_ENV, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    out = hcl.run_tf("init", "-backend=false", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    out = hcl.run_tf("test", "-no-color", cwd=tmp_path, env=env)
    failed = re.findall(r'run "([^"]+)"\.\.\. fail', out.stdout)
    assert out.returncode == 0, f"failed runs {failed}:\n{out.stdout[-4000:]}{out.stderr[-2000:]}"
    assert f"Success! {runs} passed, 0 failed." in out.stdout, out.stdout[-2000:]


@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_instances_use_the_choice(cloud: str) -> None:
    """The VM resource takes its disk type from disk.tf's choice, nothing hard-coded."""
    text = (hcl.TERRAFORM / cloud / "instances.tf").read_text()
    assert f"local.{LOCAL[cloud]}[local.machine_types[each.key]]" in text
    assert '"pd-balanced"' not in text and '"Premium_LRS"' not in text
