"""The VM start script (terraform/modules/node/files/syndeo-node) is shell, run before any
Python: its GPU lines repeat the vendor table of syndeo/core/gpus.py, and must say the same."""

from __future__ import annotations

import re
from pathlib import Path

from syndeo.core.gpus import VENDORS

SCRIPT = Path(__file__).resolve().parents[1] / "terraform/modules/node/files/syndeo-node"


def test_the_start_script_follows_the_vendor_table() -> None:
    text = SCRIPT.read_text()
    branches = dict(re.findall(r"^\s+(\w+|\*)\) (nv=.*?) ;;$", text, re.M))
    assert set(branches) == {"amd", "*"}, branches  # the default is NVIDIA's
    for name, v in VENDORS.items():
        line = branches["*" if name == "nvidia" else name]
        assert f"nv=({v.apptainer_flag})" in line, (name, line)
        assert f"gpu_vars=({' '.join(v.passed)})" in line, (name, line)
