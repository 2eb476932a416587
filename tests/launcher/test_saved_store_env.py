"""A cluster's state file is data: what a command that reaches the cluster's store puts
back into the launcher's environment (how a new shell finds the store the launch chose)
is the store's account or region, by name, never a variable the launcher or its children
would act on.  Loading the state itself sets nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from syndeo.launcher.state import RESTORED_ENV, load_launched, store_env


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
        # Set, then removed: whatever the test sets is undone after it.
        monkeypatch.setenv(name, "-")
        monkeypatch.delenv(name)
    path = syndeo_home / "clusters" / "c1" / "launched.json"
    path.parent.mkdir(parents=True)
    state = {"target": "azure", "cluster_id": "c1", "rendezvous": "az://c/p", "started_at": 0}
    # As the previous launcher wrote it (its free `data`).
    data = {"module_dir": "/m", "workspace": "/w", "join_timeout": 60, "rendezvous_env": planted}
    path.write_text(json.dumps({**state, "data": data}))
    before = dict(os.environ)
    launched = load_launched("c1")
    assert dict(os.environ) == before
    assert store_env(launched) == {"AZURE_STORAGE_ACCOUNT": "syndeoacct"}
    assert {"AZURE_STORAGE_ACCOUNT", "ALIBABA_CLOUD_REGION"} == RESTORED_ENV
