"""The node side of autostop without a watcher (syndeo/node/poweroff.py): the head's
rule, each node's exit status after the cluster stopped, and the VM's ExecStopPost
script that turns that status into a power-off (terraform/modules/node/files).

The rendezvous is the real file store; the script runs under a real shell with a
``poweroff`` of this test's own first and alone on PATH (never the host's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from syndeo.core.nodeconfig import AUTOSTOP_GRACE_S, NodeSettings
from syndeo.node import poweroff
from syndeo.node.workload import Monitor, _stop_for_autostop
from syndeo.rendezvous import Rendezvous, open_rendezvous
from tests.support.helpers import run_node

SCRIPT = Path(__file__).resolve().parents[2] / "terraform/modules/node/files/syndeo-node-stopped"


def _settings(tmp_path: Path, rank: int = 0, **fields: object) -> NodeSettings:
    base = {"cluster_id": "po", "rank": rank, "nodes": 2, "scratch": "/tmp/sy-po/0"}
    base.update(rendezvous=(tmp_path / "rdv").as_uri(), target="aws")
    return NodeSettings.model_validate({**base, **fields})


def _rdv(s: NodeSettings) -> Rendezvous:
    return open_rendezvous(s.rendezvous, s.cluster_id, s.attempt)


def test_the_head_stops_only_after_autostop_and_its_grace(tmp_path: Path) -> None:
    s = _settings(tmp_path, autostop_s=60, autostop_grace_s=30)
    now = time.time()
    assert poweroff.after_s(s) == 90
    assert not poweroff.due(s, None, now)  # busy
    assert not poweroff.due(s, now - 89, now)  # the watcher's turn (autostop) and grace
    assert poweroff.due(s, now - 90, now)
    # Without autostop_grace: the default grace.
    assert poweroff.after_s(_settings(tmp_path, autostop_s=60)) == 60 + AUTOSTOP_GRACE_S


@pytest.mark.parametrize("target", ["local", "slurm", "ssh", "alibaba", "manual"])
def test_off_the_clouds_that_power_off_never(target: str, tmp_path: Path) -> None:
    s = _settings(tmp_path, target=target, autostop_s=60, autostop_grace_s=0)
    assert poweroff.after_s(s) is None
    assert not poweroff.due(s, 0.0, time.time())
    rdv = _rdv(s)
    rdv.request_stop(poweroff.AUTOSTOP_REASON)
    assert poweroff.exit_status(s, rdv, 0, print) == 0


def test_without_autostop_never(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert poweroff.after_s(s) is None and not poweroff.due(s, 0.0, time.time())


def test_the_head_asks_the_cluster_to_stop_saying_autostop(tmp_path: Path) -> None:
    s = _settings(tmp_path, autostop_s=60, autostop_grace_s=30)
    rdv = _rdv(s)
    monitor = Monitor(s, rdv, "127.0.0.1:1", tmp_path / "token", None)  # type: ignore[arg-type]
    why = _stop_for_autostop(monitor)
    assert "autostop" in why and "90 s" in why
    assert rdv.stop_reason() == poweroff.AUTOSTOP_REASON


@pytest.mark.parametrize("rank", [0, 1])
def test_each_cloud_node_asks_for_its_power_off_after_an_autostop(
    rank: int, tmp_path: Path
) -> None:
    s = _settings(tmp_path, rank=rank, autostop_s=60)
    rdv = _rdv(s)
    assert poweroff.exit_status(s, rdv, 0, print) == 0  # not asked to stop
    rdv.request_stop("down")
    assert poweroff.exit_status(s, rdv, 0, print) == 0  # `down`: the launcher removes it
    rdv.request_stop(poweroff.AUTOSTOP_REASON)
    assert poweroff.exit_status(s, rdv, 0, print) == poweroff.POWEROFF_EXIT
    assert poweroff.exit_status(s, rdv, 3, print) == 3  # a failed node keeps its status


def _stop_record_unreadable(rdv: Rendezvous, tmp_path: Path) -> tuple[Path, Path]:
    """Make the stop record unreadable (a directory where the file was: EISDIR, whoever
    runs the test) and return (the record, where it was put aside)."""
    record = next((tmp_path / "rdv").rglob("ctl/stop"))
    aside = record.with_name("stop.aside")
    record.rename(aside)
    record.mkdir()
    return record, aside


def test_a_node_retries_a_stop_record_it_cannot_read_yet(tmp_path: Path) -> None:
    """The store out of reach just as the cluster stops (CI saw S3 time out) must not
    leave a VM on: the node keeps reading, and powers off once it can."""
    s = _settings(tmp_path, rank=1, autostop_s=60)
    rdv = _rdv(s)
    rdv.request_stop(poweroff.AUTOSTOP_REASON)
    record, aside = _stop_record_unreadable(rdv, tmp_path)

    def heal() -> None:
        time.sleep(2.0)
        record.rmdir()
        aside.rename(record)

    healer = threading.Thread(target=heal)
    healer.start()
    said: list[str] = []
    try:
        assert poweroff.exit_status(s, rdv, 0, said.append) == poweroff.POWEROFF_EXIT
    finally:
        healer.join()
    assert any("trying again" in line for line in said), said


def test_a_node_that_never_reads_the_stop_record_keeps_its_vm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(poweroff, "STOP_READ_S", 1.5)
    s = _settings(tmp_path, rank=1, autostop_s=60)
    rdv = _rdv(s)
    rdv.request_stop(poweroff.AUTOSTOP_REASON)
    _stop_record_unreadable(rdv, tmp_path)
    said: list[str] = []
    assert poweroff.exit_status(s, rdv, 0, said.append) == 0
    assert "not powering off" in said[-1], said


def _run_script(
    tmp_path: Path, code: str, status: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    mark = tmp_path / "powered-off"
    fake = bin_dir / "poweroff"
    fake.write_text(f"#!/bin/sh\necho off > {mark}\n")
    fake.chmod(0o755)
    env = {"PATH": str(bin_dir), "EXIT_CODE": code, "EXIT_STATUS": status}
    out = subprocess.run(
        ["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return out, mark


@pytest.mark.parametrize(
    ("code", "status"), [("exited", "0"), ("exited", "1"), ("killed", "TERM"), ("exited", "")]
)
def test_the_vm_stays_on_after_any_other_end(code: str, status: str, tmp_path: Path) -> None:
    out, mark = _run_script(tmp_path, code, status)
    assert out.returncode == 0, out.stderr
    assert not mark.exists()


def test_the_vm_powers_off_when_the_node_asked(tmp_path: Path) -> None:
    out, mark = _run_script(tmp_path, "exited", str(poweroff.POWEROFF_EXIT))
    assert out.returncode == 0, out.stderr
    assert mark.read_text() == "off\n"


def test_the_script_and_the_node_agree_on_the_status() -> None:
    text = SCRIPT.read_text()
    assert re.findall(r'EXIT_STATUS:-\}" != (\d+)', text) == [str(poweroff.POWEROFF_EXIT)]
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize("stop", [None, "down", poweroff.AUTOSTOP_REASON])
def test_a_workload_that_exits_75_never_asks_for_the_power_off(
    stop: str | None, tmp_path: Path
) -> None:
    """75 is also a workload's checkpoint status; only the node's own decision (the
    cluster stopped itself for autostop) may make the node exit with it."""
    s = _settings(tmp_path, autostop_s=60)
    rdv = _rdv(s)
    if stop is not None:
        rdv.request_stop(stop)
    said: list[str] = []
    status = poweroff.exit_status(s, rdv, poweroff.POWEROFF_EXIT, said.append)
    out, mark = _run_script(tmp_path, "exited", str(status))
    assert out.returncode == 0, out.stderr
    assert not mark.exists(), f"the VM powers off after the node exited {status}"
    assert status == poweroff.WORKLOAD_POWEROFF_EXIT
    assert said and "the workload exited 75" in said[0]


@pytest.mark.cluster
def test_a_real_head_whose_workload_exits_75_stays_on(tmp_path: Path) -> None:
    """``syndeo node`` itself, a one-node head running a ``deploy`` workload that exits
    75: the node's status is not the power-off's, the done record keeps the workload's."""
    scratch = Path(f"/tmp/sy-po75-{os.getpid()}")
    env = {
        "SYNDEO_CLUSTER_ID": "po75",
        "SYNDEO_RANK": "0",
        "SYNDEO_NODES": "1",
        "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "120",
        "SYNDEO_RUN": f"{sys.executable} -c 'raise SystemExit(75)'",
        "SYNDEO_MEMORY_MB": "1024",
        "SYNDEO_OBJECT_STORE_MB": "100",
    }
    try:
        proc = run_node(env, timeout=240)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    done = open_rendezvous(env["SYNDEO_RENDEZVOUS"], "po75").read_done()
    assert done is not None and done.exit_code == 75, proc.stderr[-2000:]
    out, mark = _run_script(tmp_path, "exited", str(proc.returncode))
    assert out.returncode == 0 and not mark.exists(), f"powered off after {proc.returncode}"
    assert proc.returncode == poweroff.WORKLOAD_POWEROFF_EXIT, proc.stderr[-2000:]
    assert "the workload exited 75" in proc.stderr
