"""A cluster's state file is data: what ``load_launched`` puts back into the launcher's
environment (how a new shell finds the store the launch chose) is the store's account or
region, by name, never a variable the launcher or its children would act on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from syndeo.launcher.state import RESTORED_ENV, load_launched


def test_only_store_settings_come_back_from_a_state_file(
    syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = {
        "AZURE_STORAGE_ACCOUNT": "syndeoacct",
        "LD_PRELOAD": "/tmp/evil.so",
        "PYTHONPATH": "/tmp/evil",
        "PATH": "/tmp/evil",
        "AWS_ACCESS_KEY_ID": "AKIAPLANTED",
    }
    for name in ("AZURE_STORAGE_ACCOUNT", "LD_PRELOAD", "PYTHONPATH", "AWS_ACCESS_KEY_ID"):
        # Set, then removed: whatever load_launched sets is undone after the test.
        monkeypatch.setenv(name, "-")
        monkeypatch.delenv(name)
    path = syndeo_home / "clusters" / "c1" / "launched.json"
    path.parent.mkdir(parents=True)
    state = {"target": "azure", "cluster_id": "c1", "rendezvous": "az://c/p", "started_at": 0}
    path.write_text(json.dumps({**state, "data": {"rendezvous_env": planted}}))
    path_before = os.environ["PATH"]
    load_launched("c1")
    assert os.environ["AZURE_STORAGE_ACCOUNT"] == "syndeoacct"
    assert os.environ["PATH"] == path_before
    for name in ("LD_PRELOAD", "PYTHONPATH", "AWS_ACCESS_KEY_ID"):
        assert name not in os.environ, name
    assert {"AZURE_STORAGE_ACCOUNT", "ALIBABA_CLOUD_REGION"} == RESTORED_ENV
