"""`down` from a new shell, for a deploy whose launcher was killed outright (SIGKILL, a
lost laptop): the state the launch saved must let `down` check the head's signed word
that it stopped.  Without the launch key it cannot tell a real done record from a
planted one, and waits its whole timeout before it removes the machines.

A Terraform-backed target on a provider-free module, with the real terraform binary
(the AWS run of the same path: tests/aws/test_lifecycle.py, a launcher killed outright).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syndeo.launcher import deploy
from syndeo.launcher.spec import launched_key
from syndeo.launcher.state import load_launched
from syndeo.rendezvous import DoneRecord, open_rendezvous
from tests.support.tftarget import ModuleTarget, one_node_spec

KEY = "cd" * 32
MODULE = 'resource "terraform_data" "machine" {}\n'


def test_a_new_shell_checks_a_deploys_done_record_with_its_saved_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYNDEO_HOME", str(tmp_path / "home"))
    module = tmp_path / "module"
    module.mkdir()
    (module / "main.tf").write_text(MODULE)
    uri = f"file://{tmp_path / 'rdv'}"
    spec = one_node_spec("dk", uri, launch_key=KEY)
    ModuleTarget(module).launch(spec)  # a deploy's launch: no spec saved, no watcher
    # The launcher is gone; a new shell has only what the launch saved.
    saved = load_launched("dk")
    assert saved.spec is None and launched_key(saved) == KEY
    rdv = open_rendezvous(uri, "dk", 0, KEY)
    planted = DoneRecord(cluster_id="dk", attempt=0, exit_code=0, finished_at=2.0)
    rdv.mark_done(planted)  # unsigned: whoever can write the store could plant it
    fresh = ModuleTarget(module)
    assert fresh.poll(saved) is None
    rdv.mark_done(planted.model_copy(update={"exit_code": 130}).signed(KEY))
    assert fresh.poll(saved) == 130
    # `down`'s wait for the head ends at the signed record, not at its timeout.
    assert deploy._head_ended(fresh, saved, timeout_s=0.0)
