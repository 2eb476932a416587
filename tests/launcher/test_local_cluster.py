"""The local target end to end: real Ray clusters of separate `syndeo node` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from syndeo.core.timeline import problems
from tests.support.helpers import (
    assert_nothing_left,
    processes_of,
    read_json,
    start_syndeo,
    syndeo,
)

PROBE = Path(__file__).with_name("workload_probe.py")


def _deploy_args(cid: str, nodes: int, run: str, results: Path) -> list[str]:
    return [
        "deploy",
        "--target",
        "local",
        "--nodes",
        str(nodes),
        "--cluster-id",
        cid,
        "--run",
        run,
        "--results-dir",
        str(results),
        "--join-timeout",
        "240",
    ]


@pytest.mark.cluster
def test_three_nodes_come_up_run_the_users_program_and_leave_nothing(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "t3nodes"
    proc = syndeo(
        *_deploy_args(cid, 3, f"python {PROBE}", tmp_path / "res"), cwd=tmp_path, timeout=400
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_json(tmp_path / "res" / cid / "result.json")
    assert result["nodes"] == 3
    # Each node has its own loopback address: three "hosts" on one machine.
    assert result["node_ips"] == ["127.0.0.10", "127.0.0.11", "127.0.0.12"]
    assert result["task_nodes"] == 3  # a task pinned to each node ran there
    assert "PROBE" in proc.stdout  # the workload's output is the run's output
    summary = read_json(tmp_path / "res" / cid / "deploy.json")
    assert summary["exit_code"] == 0
    timings = summary["timings_s"]
    assert isinstance(timings, dict) and 0 < timings["all_joined_s"] <= timings["head_exit_s"]
    # Where bring-up time went: every node's phases, complete and in order.
    assert problems(read_json(tmp_path / "res" / cid / "timeline.json"), nodes=3) == []
    assert_nothing_left(cid)
    # The rendezvous (which held the token) and the nodes' scratch dirs (Ray's temp
    # dirs, each node's copy of the token) are gone after teardown.
    assert not (syndeo_home / "rendezvous" / cid).exists()
    uri = (syndeo_home / "rendezvous").resolve().as_uri()
    key = zlib.crc32(f"{uri}|{cid}".encode())
    assert not Path(f"/tmp/syndeo-{os.getuid()}/{key:08x}").exists()


@pytest.mark.cluster
def test_workload_exit_status_becomes_the_runs(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "texit"
    proc = syndeo(*_deploy_args(cid, 1, f"python {PROBE} 7", tmp_path / "res"), cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr[-3000:]
    assert "workload exited with status 7" in proc.stderr
    assert "Traceback" not in proc.stderr
    # The result it wrote before failing is still collected, whole.
    assert read_json(tmp_path / "res" / cid / "result.json")["nodes"] == 1
    assert_nothing_left(cid)


def test_missing_workload_command_is_a_clear_error(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tnocmd"
    proc = syndeo(*_deploy_args(cid, 1, "no-such-program --x", tmp_path / "res"), cwd=tmp_path)
    assert proc.returncode == 127
    assert "workload command not found: 'no-such-program'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert_nothing_left(cid)


@pytest.mark.cluster
def test_two_clusters_at_once_do_not_collide(syndeo_home: Path, tmp_path: Path) -> None:
    runs = {
        cid: start_syndeo(*_deploy_args(cid, 2, f"python {PROBE}", tmp_path / "res"), cwd=tmp_path)
        for cid in ("tpair-a", "tpair-b")
    }
    for cid, proc in runs.items():
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{cid}: {err[-3000:]}"
    a, b = (read_json(tmp_path / "res" / cid / "result.json") for cid in runs)
    assert a["nodes"] == b["nodes"] == 2  # each saw only its own nodes
    assert a["address"] != b["address"]  # distinct GCS ports chosen by the OS
    for cid in runs:
        assert_nothing_left(cid)


@pytest.mark.cluster
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_ctrl_c_term_hup_tear_everything_down(
    signum: int, syndeo_home: Path, tmp_path: Path
) -> None:
    """Ctrl-C, a kill, and a closed terminal/SSH session all end a deploy the same way:
    nodes stopped, records removed, the cluster id free again."""
    cid = f"tsig{signum}"
    proc = start_syndeo(
        *_deploy_args(cid, 2, f"python {PROBE} 0 600", tmp_path / "res"), cwd=tmp_path
    )
    status = syndeo_home / "rendezvous" / cid / "a0" / "status.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if status.exists() and json.loads(status.read_text())["phase"] == "running":
            break
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.5)
    else:
        raise AssertionError("cluster never reached the running phase")
    assert processes_of(cid), "expected live processes before Ctrl-C"
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert_nothing_left(cid)
    assert not (tmp_path / "res" / cid / "result.json").exists()
    left = sorted(p.name for p in (syndeo_home / "rendezvous" / cid).rglob("*") if p.is_file())
    assert left == [], f"records left in the rendezvous: {left}"
    if signum == signal.SIGTERM:
        # The id is free again: a new deploy with it gets past the claim.
        again = syndeo(*_deploy_args(cid, 1, "true", tmp_path / "res"), cwd=tmp_path)
        assert again.returncode == 0, again.stderr[-2000:]


@pytest.mark.cluster
def test_up_serves_token_clients_only_and_down_stops_it(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tup"
    proc = syndeo("up", "--nodes", "2", "--cluster-id", cid, cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        export = next(ln for ln in proc.stdout.splitlines() if "export RAY_ADDRESS=" in ln)
        env = dict(kv.split("=", 1) for kv in export.split("export ", 1)[1].split())
        token_path = Path(env["RAY_AUTH_TOKEN_PATH"])
        assert token_path.stat().st_mode & 0o777 == 0o600
        assert token_path.read_text() not in proc.stdout + proc.stderr  # never printed
        client = "import ray; ray.init(); print('ALIVE', sum(n['Alive'] for n in ray.nodes()))"
        # A program nobody here wrote, configured only by the printed variables.
        ok = subprocess.run(
            [sys.executable, "-c", client],
            env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert "ALIVE 2" in ok.stdout
        # The same program with a wrong token is refused.
        bad_token = tmp_path / "wrong-token"
        bad_token.write_text("not-the-token")
        bad = subprocess.run(
            [sys.executable, "-c", client],
            env={"PATH": "/usr/bin:/bin", **env, "RAY_AUTH_TOKEN_PATH": str(bad_token)},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert bad.returncode != 0
        assert "ALIVE" not in bad.stdout
        assert "AuthenticationError" in bad.stderr or "InvalidAuthToken" in bad.stderr
    finally:
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert_nothing_left(cid)


@pytest.mark.cluster
def test_two_launchers_with_one_cluster_id_one_wins_the_other_starts_nothing(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tsameid"
    runs = [
        start_syndeo(*_deploy_args(cid, 2, f"python {PROBE}", tmp_path / f"res{i}"), cwd=tmp_path)
        for i in range(2)
    ]
    outs = [proc.communicate(timeout=600) for proc in runs]
    codes = [proc.returncode for proc in runs]
    assert sorted(codes) != [0, 0] and 0 in codes, outs
    win, lose = (0, 1) if codes[0] == 0 else (1, 0)
    err = outs[lose][1]
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("syndeo: error:")]
    assert len(lines) == 1 and f"cluster id '{cid}' is already in use" in lines[0], err
    # The loser launched nothing: no node of it ever logged, and the winner's
    # cluster is exactly its own two nodes (no stray worker joined its head).
    assert read_json(tmp_path / f"res{win}" / cid / "result.json")["nodes"] == 2
    assert not (tmp_path / f"res{lose}" / cid).exists()
    assert_nothing_left(cid)
    # The claim is released with the rest: the id can be used again.
    assert not (syndeo_home / "rendezvous" / cid).exists()
