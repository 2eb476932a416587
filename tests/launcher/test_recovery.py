"""A lost worker comes back: a real 3-node local deploy running the benchmark, one
worker's whole process tree SIGKILLed mid-run; the launcher starts a replacement for
that rank, it joins the running head, and the benchmark's count stays exact."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import psutil
import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher.config import RecoverySettings, load_config
from syndeo.launcher.deploy import deploy
from syndeo.launcher.targets.local import LocalTarget
from syndeo.launcher.ui import Ui
from tests.support.helpers import (
    assert_nothing_left,
    kill_rank,
    local_status,
    one_line_error,
    reap,
    start_syndeo,
    syndeo,
    wait_benchmark_running,
)

CONFIG = """\
target = "local"
nodes = 3
cpus_per_node = 1
join_timeout_s = 240
[bench]
samples_per_cpu = 450000
repeats = 1
[recovery]
replace_lost = true
max_replacements = 1
"""


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_the_count_stays_exact(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cid = "recover-local"
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text(CONFIG)
    proc = start_syndeo("deploy", "--config", str(cfg), "--cluster-id", cid, cwd=tmp_path)
    try:
        wait_benchmark_running(proc, syndeo_home, cid)
        assert kill_rank(cid, 2) >= 2  # the node and at least its Ray
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert "rank 2 lost; started a replacement" in err
        result = json.loads((tmp_path / "results" / cid / "result.json").read_text())
        [env] = result["results"]
        assert env["samples_counted"] == env["samples_requested"] == 450000 * 3  # per repeat
        # The benchmark saw the loss and the replacement (Ray's node table), and what it
        # cost: throughput before the loss and until the cluster was whole again.
        [loss] = env["node_losses"]
        # The kill lands in the one measured repeat (a second or so into its ~10 s), and
        # the repeat cannot end before the lost actor's tasks ran again on the replacement.
        assert loss["repeat"] == 0 and loss["nodes_before"] == 3, loss
        assert loss["nodes_after"] == 2 and loss["back_at_s"] > loss["lost_at_s"], loss
        assert loss["steps_per_s_before"] > 0 and loss["dip"] is not None, loss
        print("benchmark: node loss", json.dumps(loss))
        summary = json.loads((tmp_path / "results" / cid / "deploy.json").read_text())
        assert summary["lost_ranks"] == [2]
        [event] = summary["recovery"]
        assert event["rank"] == 2 and event["replaced"].startswith("rank 2 (pid ")
        assert event["lost_s"] <= event["replaced_s"] <= event["joined_s"]
        print("lost -> replacement joined, s:", event["replacement_joined_after_s"])
        print("repeats, steps/s:", [r["steps_per_s"] for r in env["syndeo"]["repeats"]])
        assert_nothing_left(cid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reap(cid)


def test_recovery_settings_are_checked_before_anything_starts(
    tmp_path: Path, syndeo_home: Path
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[recovery]\nreplace_lost = true\nmax_replacements = -1\n")
    assert "max_replacements" in one_line_error(
        syndeo("deploy", "--config", str(cfg), cwd=tmp_path)
    )


def test_replace_lost_is_refused_on_a_target_that_cannot_replace(
    tmp_path: Path, syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every target of this checkout can replace a node: the rule is checked on one
    # that says it cannot, before anything is claimed or started.
    monkeypatch.setattr(LocalTarget, "can_replace", classmethod(lambda cls: False))
    cfg = load_config(workdir=tmp_path, results_dir=tmp_path / "results")
    cfg = cfg.model_copy(update={"recovery": RecoverySettings(replace_lost=True)})
    with pytest.raises(ConfigError, match="the local target cannot replace a lost node"):
        deploy(cfg, Ui(quiet=True))
    assert not (tmp_path / "results").exists()
    assert not list(syndeo_home.rglob("claim*"))


@pytest.mark.slow
def test_an_up_cluster_replaces_a_lost_worker_until_down(tmp_path: Path, syndeo_home: Path) -> None:
    """`up` replaces lost workers by default: its watcher (a process of its own, which
    outlives `up`) starts a replacement that joins the serving head; `down` ends the
    watcher first, then the cluster with the replacement."""
    cid = "recover-up"
    up = syndeo(
        "up",
        "--nodes",
        "3",
        "--cluster-id",
        cid,
        "--join-timeout",
        "240",
        cwd=tmp_path,
        timeout=400,
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        state = syndeo_home / "clusters" / cid
        pid = json.loads((state / "launched.json").read_text())["watcher"]["pid"]
        assert psutil.Process(pid).is_running()
        assert kill_rank(cid, 2) >= 2
        deadline = time.monotonic() + 240
        events: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                events = json.loads((state / "recovery.json").read_text())
            if events and "joined_s" in events[0]:
                break
            time.sleep(0.5)
        [event] = events
        assert event["rank"] == 2 and str(event["replaced"]).startswith("rank 2 (pid "), event
        st = local_status(syndeo_home, cid)
        assert st["nodes_lost"] == [] and st["nodes_joined"] == [0, 1, 2], st
        print("up: lost -> replacement joined, s:", event["replacement_joined_after_s"])
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        assert_nothing_left(cid)
        assert "replacement joined" in (state / "watch.log").read_text()
    finally:
        if (syndeo_home / "clusters" / cid / "launched.json").exists():
            syndeo("down", "--cluster-id", cid, cwd=tmp_path)
        reap(cid)
