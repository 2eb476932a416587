"""A result the rendezvous does not take is kept on the node's disk, and where is said;
what the head's teardown swallows is logged."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.core import launchkey
from syndeo.core.nodeconfig import NodeSettings
from syndeo.node import workload
from syndeo.node.raynode import RayProcess
from syndeo.rendezvous import open_rendezvous


@pytest.fixture(autouse=True)
def _scratch() -> Iterator[None]:
    yield
    shutil.rmtree(f"/tmp/sykept-{os.getpid()}", ignore_errors=True)


def _settings(tmp_path: Path, rendezvous: str) -> NodeSettings:
    scratch = Path(f"/tmp/sykept-{os.getpid()}")  # short: Ray's socket paths live below
    scratch.mkdir(mode=0o700, exist_ok=True)
    return NodeSettings(
        cluster_id="kept",
        rank=0,
        nodes=1,
        rendezvous=rendezvous,
        scratch=scratch,
        workdir=tmp_path / "work",
        launch_key=launchkey.new_key(),
    )


def _broken_store(tmp_path: Path) -> str:
    """A real file:// rendezvous that cannot be written (its directory is a file)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    return (blocker / "rdv").as_uri()


def test_a_non_json_result_is_kept_and_its_place_named(tmp_path: Path) -> None:
    s = _settings(tmp_path, (tmp_path / "rdv").as_uri())
    result = s.scratch / "result.json"
    result.write_text('{"half": ')
    rc, message = workload._upload_result(
        open_rendezvous(s.rendezvous, "kept", launch_key=s.launch_key), result, 0, s
    )
    assert rc == 1
    kept = s.workdir / "syndeo-kept-results" / "kept-a0-r0-result.json"  # type: ignore[operator]
    assert f"at {kept}" in message and "not valid JSON" in message, message
    assert kept.read_text() == '{"half": '  # outside scratch, which teardown deletes


def test_a_failed_upload_keeps_the_result_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workload, "DELIVER_DEADLINE_S", 0.0)  # no 30-minute wait here
    s = _settings(tmp_path, _broken_store(tmp_path))
    result = s.scratch / "result.json"
    result.write_text('{"steps": 42}')
    rc, message = workload._upload_result(
        open_rendezvous(s.rendezvous, "kept", launch_key=s.launch_key), result, 0, s
    )
    assert rc == 1
    kept = s.workdir / "syndeo-kept-results" / "kept-a0-r0-result.json"  # type: ignore[operator]
    assert "result not uploaded" in message and f"at {kept}" in message, message
    assert kept.read_text() == '{"steps": 42}'


def test_monitor_finish_logs_what_it_swallows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = _settings(tmp_path, _broken_store(tmp_path))
    rdv = open_rendezvous(s.rendezvous, "kept", launch_key=s.launch_key)
    token = s.scratch / "token"
    monitor = workload.Monitor(s, rdv, "127.0.0.1:1", token, RayProcess(s, token, None))
    monitor.finish(3, "workload exited with status 3")  # must not raise
    err = capsys.readouterr().err
    assert "could not record the end of the run (workload exited with status 3)" in err, err
    assert "cannot create rendezvous directory" in err
