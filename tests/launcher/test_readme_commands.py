"""Commands the docs show (README.md, docs/) not covered elsewhere, run through ``invoke …``
(the clone's front end to the verbs ``syndeo`` has; docs/getting-started.md runs as written in
test_getting_started.py):
an option overriding the config file, ``deploy --keep`` then ``down`` without an id,
``deploy --mode collect`` on MuJoCo envs, the rendezvous load benchmark,
``down`` when several clusters are up, and ``invoke bench-rendezvous``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, assert_nothing_left, one_line_error, reap

INVOKE = [sys.executable, "-m", "invoke", "-r", str(ROOT)]


def invoke(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*INVOKE, *args],
        cwd=cwd,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_an_option_overrides_the_config_file(tmp_path: Path, syndeo_home: Path) -> None:
    cfg = tmp_path / "syndeo.toml"
    cfg.write_text('target = "local"\nnodes = 2\ncpus_per_node = 3\n')
    plan = invoke("deploy", "--config", str(cfg), "--nodes", "4", "--dry-run", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr[-2000:]
    # One node command per rank, 4 of them (the option), each with the file's CPUs.
    nodes = [ln for ln in plan.stdout.splitlines() if ln.rstrip(" &").count("-m syndeo node")]
    assert len(nodes) == 4
    assert all("SYNDEO_NODES=4" in ln and "SYNDEO_CPUS=3" in ln for ln in nodes)


@pytest.mark.cluster
def test_keep_then_down_without_an_id_and_several_up_named(
    tmp_path: Path, syndeo_home: Path
) -> None:
    kept, other = "tkeep1", "tkeep2"
    try:
        deploy = invoke(
            "deploy",
            "--nodes",
            "2",
            "--cluster-id",
            kept,
            "--keep",
            "--run",
            "python -c pass",
            cwd=tmp_path,
        )
        assert deploy.returncode == 0, deploy.stderr[-3000:]
        assert f"cluster {kept} kept up" in deploy.stderr
        assert "(kept up)" in deploy.stderr and "(torn down)" not in deploy.stderr
        up = invoke("up", "--nodes", "2", "--cluster-id", other, cwd=tmp_path)
        assert up.returncode == 0, up.stderr[-3000:]
        several = invoke("down", cwd=tmp_path)
        assert f"several clusters are up ({kept}, {other}): name one" in one_line_error(several)
        assert invoke("down", "--cluster-id", other, cwd=tmp_path).returncode == 0
        assert_nothing_left(other)
        alone = invoke("down", cwd=tmp_path)  # the only one up: no id needed
        assert alone.returncode == 0, alone.stderr[-2000:]
        assert f"cluster {kept} is down" in alone.stderr
        assert_nothing_left(kept)
        assert "no cluster is up" in one_line_error(invoke("down", cwd=tmp_path))
    finally:
        for cid in (kept, other):
            invoke("down", "--cluster-id", cid, cwd=tmp_path)
            reap(cid)


@pytest.mark.slow
def test_invoke_bench_rendezvous_writes_its_measurements(tmp_path: Path) -> None:
    out = tmp_path / "rdv.json"
    run = invoke("bench-rendezvous", "--backend", "file", "--out", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["backend"] == "file"
    assert report["registrations"] and report["head_latency"]


@pytest.mark.cluster
def test_collect_mode_with_mujoco_envs_counts_every_sample(
    tmp_path: Path, syndeo_home: Path
) -> None:
    """``deploy --env Ant-v5,Humanoid-v5 --mode collect --repeats 2`` (the benchmark
    settings of docs/getting-started.md, smaller): both MuJoCo envs, collect mode, every
    repeat exact."""
    cid = "tmujoco"
    run = invoke(
        "deploy",
        "--nodes",
        "2",
        "--cpus-per-node",
        "1",
        "--cluster-id",
        cid,
        "--env",
        "Ant-v5,Humanoid-v5",
        "--mode",
        "collect",
        "--repeats",
        "2",
        "--samples-per-cpu",
        "200",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "results" / cid / "result.json").read_text())
    assert result["partial"] is False
    assert result["config"]["modes"] == ["collect"] and result["config"]["repeats"] == 2
    assert [r["env_id"] for r in result["results"]] == ["Ant-v5", "Humanoid-v5"]
    for env in result["results"]:
        # One actor per cluster CPU; samples per repeat = samples per CPU x actors.
        assert env["mode"] == "collect" and env["workers"] == 2, env
        assert env["samples_counted"] == env["samples_requested"] == 200 * 2, env
        assert [r["samples"] for r in env["syndeo"]["repeats"]] == [400, 400], env
        assert env["syndeo"]["mean"] > 0
    assert "Humanoid-v5" in run.stdout + run.stderr  # the result table names it
    assert_nothing_left(cid)


def test_the_rendezvous_load_benchmark_writes_what_it_counted(tmp_path: Path) -> None:
    """``python -m benchmarks.rendezvous_load --backend B …`` (syndeo/rendezvous/README.md),
    small: every simulated node's requests counted per phase, the rates derived from them."""
    out = tmp_path / "load.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.rendezvous_load",
            "--backend",
            "file",
            "--workers",
            "40",
            "--seconds",
            "4",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert json.loads(run.stdout) == report
    assert (report["backend"], report["workers"], report["policy"]) == ("file", 40, "after")
    nodes = 41
    counts = {phase: sum(calls.values()) for phase, calls in report["requests"].items()}
    assert set(counts) == {"join", "run", "leave"} and all(counts.values()), counts
    # Every worker registered and read the head at least once while joining.
    assert report["join_requests_per_node"] == round(counts["join"] / nodes, 1) >= 1
    assert report["run_requests_per_node_hour"] == round(counts["run"] / nodes / (4 / 3600))
