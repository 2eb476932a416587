"""The saved state of an ``up`` cluster (``launched.json``): typed, read from the files
the previous launcher wrote (tests/golden/launched-v1-*.json, written by a real ``up``,
``grow`` and ``shrink`` on the local target, and a real ``up`` and ``grow`` on the local
Slurm cluster and on the ssh bed), refused in one line when it is of a version this
launcher does not know, changed by one writer under the cluster's lock, and loaded
without touching the launcher's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from syndeo.core.errors import TargetError
from syndeo.launcher import ledger, watch
from syndeo.launcher.config import RecoverySettings
from syndeo.launcher.spec import (
    STATE_VERSION,
    Launched,
    LedgerEntry,
    LocalNode,
    LocalPart,
    ProcWatcher,
    SlurmPart,
    StateVersionError,
    TerraformPart,
)
from syndeo.launcher.state import load_launched, save_launched, store_env, update_launched
from syndeo.launcher.ui import Ui
from tests.support.helpers import syndeo
from tests.support.launched import make_launched

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _install(home: Path, name: str, cluster_id: str) -> Path:
    """The golden file ``name`` as the state of ``cluster_id`` in ``home``."""
    raw = json.loads((GOLDEN / name).read_text())
    raw["cluster_id"] = cluster_id
    path = home / "clusters" / cluster_id / "launched.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(raw))
    return path


def test_a_local_state_file_of_the_previous_launcher_loads_typed(syndeo_home: Path) -> None:
    _install(syndeo_home, "launched-v1-local.json", "old-local")
    launched = load_launched("old-local")
    assert launched.version == STATE_VERSION
    part = launched.local
    assert isinstance(part, LocalPart)
    assert len(part.pids) == len(part.create_times) == len(part.logs) == len(part.scratch) == 3
    assert part.next_rank == 3 and part.devices is None
    assert part.grown == [LocalNode(group="cpu", rank=2, gone=True)]
    assert isinstance(launched.watcher, ProcWatcher) and launched.watcher.pid > 0
    assert launched.recovery == RecoverySettings(replace_lost=True)
    spec = launched.saved_spec()
    assert spec.layout is not None and [g.name for g in spec.layout.groups] == ["head", "cpu"]
    assert spec.launch_key == "5a" * 32
    # What the new launcher does with it: shrink's bookkeeping, then saved and read back.
    assert launched.target == "local" and not launched.unobserved
    save_launched(launched)
    assert load_launched("old-local") == launched
    assert (
        json.loads((syndeo_home / "clusters/old-local/launched.json").read_text())["version"] == 2
    )


def test_a_slurm_state_file_of_the_previous_launcher_loads_typed(syndeo_home: Path) -> None:
    _install(syndeo_home, "launched-v1-slurm.json", "old-slurm")
    launched = load_launched("old-slurm")
    part = launched.slurm
    assert isinstance(part, SlurmPart)
    assert [(e.group, e.job_id, e.rank_base, e.nodes) for e in part.groups] == [
        ("head", "1", 0, 1),
        ("cpu", "2", 1, 1),
        ("cpu", "3", 2, 1),
    ]
    assert part.next_rank == 3 and part.hosts == ["node1"] and part.attempt_base == 0
    assert part.slurm == {"partition": "debug", "time": "00:15:00"}
    assert launched.attempt == 0 and launched.attempt_or(7) == 0
    assert launched.renew_gcs_token is False and launched.autostop_s is None
    with pytest.raises(TargetError, match="started on slurm"):
        _ = launched.local  # the wrong target's part is an error, not an empty one


def test_an_ssh_state_file_of_the_previous_launcher_loads_typed(syndeo_home: Path) -> None:
    _install(syndeo_home, "launched-v1-ssh.json", "old-ssh")
    launched = load_launched("old-ssh")
    part = launched.tf
    assert isinstance(part, TerraformPart) and part.target == "ssh"
    assert part.module_dir.endswith("/terraform/ssh") and part.workspace.endswith("/terraform")
    assert part.join_timeout == 120.0 and part.last_rank == 2
    assert part.machines["hosts"] == ["10.98.43.11", "10.98.43.12"]
    assert part.outputs["head_ip"] == "10.98.43.11"
    assert part.head_seen is not None and part.head_seen[1] >= part.head_seen[0]
    assert not part.destroyed and part.head_failure is None
    assert launched.owns_rendezvous is False and launched.rendezvous_env == {}
    assert isinstance(launched.watcher, ProcWatcher)
    assert launched.saved_spec().target == "ssh"


def test_a_state_file_of_an_unknown_version_is_refused_in_one_line(
    syndeo_home: Path, tmp_path: Path
) -> None:
    path = _install(syndeo_home, "launched-v1-local.json", "from-later")
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "version": 99}))
    with pytest.raises(StateVersionError) as err:
        load_launched("from-later")
    message = str(err.value)
    assert "\n" not in message
    assert "version 99" in message
    assert "`syndeo down --cluster-id from-later`" in message
    assert str(path.parent) in message  # or remove the dir
    # The command line says the same, once, without a traceback, before anything starts.
    down = syndeo("down", "--cluster-id", "from-later", cwd=tmp_path, timeout=60)
    assert down.returncode == 2, down.stderr
    assert down.stderr.strip() == f"syndeo: error: {message}"
    assert path.exists()  # nothing was done to it


def test_a_corrupt_state_file_is_one_line_that_names_it(syndeo_home: Path) -> None:
    path = _install(syndeo_home, "launched-v1-slurm.json", "bad")
    raw = json.loads(path.read_text())
    raw["data"]["groups"][0]["rank_base"] = "zero"
    path.write_text(json.dumps(raw))
    with pytest.raises(TargetError) as err:
        load_launched("bad")
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(f"state file {path} is corrupt: part.slurm.groups.0.rank_base")


def test_the_ledger_of_added_nodes_is_a_common_field(syndeo_home: Path) -> None:
    """The added nodes that came and went (what ``status`` counts as cost): noted as the
    target's added ranks change, saved typed, and read from a file of the previous
    launcher that kept them in its free data."""
    launched = make_launched("local", "books", "file:///x")
    ledger.note(launched, {"cpu": [1, 2]}, asked_at=100.0, now=101.0)
    ledger.note(launched, {"cpu": [2]}, asked_at=200.0, now=201.0)  # rank 1 ended
    ledger.note(launched, {"cpu": [2, 3]}, asked_at=300.0, now=301.0)
    assert [(e.rank, e.start, e.end) for e in launched.ledger] == [
        (1, 100.0, 201.0),
        (2, 100.0, None),
        (3, 300.0, None),
    ]
    assert ledger.node_seconds(launched, "cpu", 400.0) == (101.0 + 300.0 + 100.0, {1, 2, 3})
    save_launched(launched)
    assert load_launched("books").ledger == launched.ledger
    path = _install(syndeo_home, "launched-v1-local.json", "old-books")
    raw = json.loads(path.read_text())
    raw["data"]["ledger"] = [{"group": "cpu", "rank": 2, "start": 5.0, "end": None}]
    path.write_text(json.dumps(raw))
    assert load_launched("old-books").ledger == [LedgerEntry(group="cpu", rank=2, start=5.0)]


def test_the_watcher_waits_out_an_unreadable_state_file_and_stops_once_it_is_gone(
    syndeo_home: Path,
) -> None:
    """A state file there but unreadable (a bad write) is an error the watcher's poll
    raises (it logs it and polls again later); only a missing one ends the watch."""
    path = _install(syndeo_home, "launched-v1-local.json", "unread")
    raw = json.loads(path.read_text())
    raw["data"]["grown"] = "not a list"
    path.write_text(json.dumps(raw))
    # What the poll uses of its attempt before the state is read: its Ui.
    current = SimpleNamespace(ui=Ui(quiet=True))
    with pytest.raises(TargetError, match="is corrupt"):
        watch._poll("unread", current)  # type: ignore[arg-type]
    path.unlink()
    assert watch._poll("unread", current) == "ended"  # type: ignore[arg-type]


def test_loading_changes_no_environment_and_says_what_to_apply(
    syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "-")
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT")  # restored to absent afterwards
    save_launched(
        make_launched(
            "azure",
            "envless",
            "az://c/p",
            rendezvous_env={"AZURE_STORAGE_ACCOUNT": "acct", "PATH": "/tmp/evil"},
        )
    )
    before = dict(os.environ)
    launched = load_launched("envless")
    assert dict(os.environ) == before
    assert store_env(launched) == {"AZURE_STORAGE_ACCOUNT": "acct"}  # never PATH
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "mine")
    assert store_env(launched) == {}  # the shell's own setting wins


WRITER = """
import sys
from syndeo.launcher.state import update_launched
for i in range(int(sys.argv[2])):
    update_launched(sys.argv[1], lambda l: l.local.logs.append(f"{sys.argv[3]}-{i}"))
"""


def test_one_writer_under_the_lock_loses_no_change(syndeo_home: Path, tmp_path: Path) -> None:
    save_launched(make_launched("local", "busy", "file:///x"))
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    writers = [
        subprocess.Popen([sys.executable, str(script), "busy", "25", name], env=env)
        for name in ("a", "b", "c")
    ]
    assert [w.wait(120) for w in writers] == [0, 0, 0]
    logs = load_launched("busy").local.logs
    assert sorted(logs) == sorted(f"{n}-{i}" for n in "abc" for i in range(25))
    # What the change raises leaves the file as it was.
    before = (syndeo_home / "clusters/busy/launched.json").read_text()

    def fails(launched: Launched) -> None:
        launched.local.logs.clear()
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        update_launched("busy", fails)
    assert (syndeo_home / "clusters/busy/launched.json").read_text() == before
