"""What users run most, end to end through the front ends they use.

The first command of the README and docs/getting-started.md (``invoke deploy --target
local``: the built-in benchmark, no ``--run``), ``invoke up``/``down``, what a head says
when ranks never join, losing a worker or the head of a running local cluster, and dry runs
that never print a credential.  Real Ray, real subprocesses; small settings so the
benchmark takes seconds, not the paper's protocol.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import psutil
import pytest

from syndeo.compare.catalog import load_catalog
from syndeo.compare.report import build_rows
from syndeo.compare.runs import find_runs
from syndeo.launcher.config import load_config
from syndeo.rendezvous import open_rendezvous
from tests.support.bench import assert_bench_result
from tests.support.helpers import (
    ROOT,
    assert_nothing_left,
    processes_of,
    read_json,
    start_syndeo,
    syndeo,
)

PROBE = Path(__file__).with_name("workload_probe.py")
INVOKE = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT)]


def invoke(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*INVOKE, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _wait_phase(uri: str, cid: str, phase: str, proc: subprocess.Popen[str]) -> None:
    rdv = open_rendezvous(uri, cid)
    deadline = time.monotonic() + 300
    while True:
        st = rdv.read_status()
        if st is not None and st.phase == phase:
            return
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"cluster {cid} never reached {phase!r}"
        time.sleep(0.5)


def _wait_file(path: Path, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def _crash_rank(cid: str, rank: int) -> int:
    """SIGKILL every process of one node (its `syndeo node` and its Ray): a machine crash."""
    procs = [p for p in processes_of(cid) if p.environ().get("SYNDEO_RANK") == str(rank)]
    assert procs, f"no processes of rank {rank}"
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=10)
    return len(procs)


def _reap(cid: str) -> None:
    procs = processes_of(cid)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=10)


# [cost.onprem] with a round CPU-hour: (8760 / (1 x 8760 x 1) + 1000 / 1000 x 0.1) / 2
# = 0.55 $ (the compare tests' worked example).
ONPREM = """[cost.onprem]
capex_usd_per_node = 8760
amortisation_years = 1
utilisation = 1.0
power_w_per_node = 1000
usd_per_kwh = 0.1
admin_share = 0
cores_per_node = 2
"""


@pytest.mark.cluster
def test_readme_first_command_runs_the_builtin_benchmark(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "treadme"
    res = tmp_path / "res"
    proc = invoke(
        "deploy",
        "--target",
        "local",
        "--cluster-id",
        cid,
        "--results-dir",
        str(res),
        "--env",
        "CartPole-v1",
        "--repeats",
        "2",
        "--samples-per-cpu",
        "200",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_json(res / cid / "deploy.json")
    assert summary["exit_code"] == 0 and summary["nodes"] == 2
    assert "syndeo.bench run" in str(summary["workload"])  # no --run: the benchmark ran
    # Every file of a run is the user's alone, the benchmark's as any other.
    assert (res / cid / "deploy.json").stat().st_mode & 0o777 == 0o600
    cpus = 2 * int(str(summary["cpus_per_node"]))
    result = assert_bench_result(
        res / cid / "result.json", env="CartPole-v1", samples_per_cpu=200, repeats=2, cpus=cpus
    )
    assert "CartPole-v1" in proc.stdout  # the results table
    # One path, the one the user keeps (not also the head's scratch copy the benchmark
    # wrote); the console may wrap it, so compared without whitespace.
    said = "".join((proc.stdout + proc.stderr).split())
    assert said.count("result:") == 1 and f"result:{res / cid / 'result.json'}" in said
    assert_nothing_left(cid)
    # …and `invoke report` renders what deploy collected.
    rep = invoke("report", "--results-dir", str(res), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "CartPole" in (tmp_path / "rep" / "report.md").read_text()
    # …and `invoke compare` prices what this deploy wrote (not a hand-written summary):
    # its measured rate at 2 nodes x cpus_per_node CPUs of 0.55 $/CPU-hour.
    config = tmp_path / "onprem.toml"
    config.write_text(ONPREM)
    out = tmp_path / "cmp"
    cmp = invoke(
        "compare", "--results", str(res), "--config", str(config), "--out", str(out), cwd=tmp_path
    )
    assert cmp.returncode == 0, cmp.stderr[-3000:]
    assert "not compared" not in cmp.stdout, cmp.stdout
    found = find_runs(res)
    assert not found.skipped, found.skipped
    (row,) = build_rows(found.runs, load_catalog(None), load_config(config).cost.onprem)
    assert (row.target, row.nodes, row.cpus) == ("local", 2, cpus)
    measured = result.results[0].syndeo
    assert row.rates == [r.steps_per_s for r in measured.repeats]
    assert row.price.usd_per_h == pytest.approx(0.55 * cpus)
    assert row.usd_per_m == pytest.approx(0.55 * cpus / (measured.mean * 3600) * 1e6)
    assert (out / "report.md").is_file() and (out / "report.html").is_file()


@pytest.mark.cluster
def test_invoke_bench_standalone(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = invoke(
        "bench",
        "--env",
        "CartPole-v1",
        "--repeats",
        "2",
        "--samples-per-cpu",
        "100",
        "--no-local-limit",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # A local Ray of this machine's CPUs (as Ray counts them).
    assert_bench_result(out, env="CartPole-v1", samples_per_cpu=100, repeats=2)


@pytest.mark.cluster
def test_invoke_up_and_down(syndeo_home: Path, tmp_path: Path) -> None:
    cid = "tinvup"
    try:
        up = invoke("up", "--nodes", "2", "--cluster-id", cid, cwd=tmp_path)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "export RAY_ADDRESS=" in up.stdout and f"syndeo down --cluster-id {cid}" in up.stdout
        assert len({p.environ().get("SYNDEO_RANK") for p in processes_of(cid)}) == 2
        down = invoke("down", "--cluster-id", cid, cwd=tmp_path)
        assert down.returncode == 0, down.stderr[-3000:]
        assert_nothing_left(cid)
        assert not (syndeo_home / "rendezvous" / cid).exists()
    finally:
        _reap(cid)


@pytest.mark.cluster
def test_join_timeout_names_the_missing_ranks(tmp_path: Path) -> None:
    # A head of 3 nodes whose workers never start: it must say which ranks are missing.
    scratch = Path(f"/tmp/syndeo-{os.getuid()}/jt{os.getpid()}")
    env = {
        "SYNDEO_CLUSTER_ID": "tjoin",
        "SYNDEO_RANK": "0",
        "SYNDEO_NODES": "3",
        "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "15",
        "SYNDEO_NODE_IP": "127.0.0.40",
        "SYNDEO_RUN": "true",
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "syndeo", "node"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 3, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        assert "0 of 2 workers joined after 15 s: missing ranks 1, 2" in proc.stderr
        done = open_rendezvous(env["SYNDEO_RENDEZVOUS"], "tjoin").read_done()
        assert done is not None and "missing ranks 1, 2" in done.message
    finally:
        _reap("tjoin")
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.cluster
def test_losing_a_worker_is_reported_and_the_run_completes(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tlostw"
    uri = (syndeo_home / "rendezvous").resolve().as_uri()
    ready = tmp_path / "pinned-tasks-ran"
    proc = start_syndeo(
        "deploy",
        "--target",
        "local",
        "--nodes",
        "2",
        "--cluster-id",
        cid,
        "--results-dir",
        str(tmp_path / "res"),
        "--join-timeout",
        "240",
        "--run",
        f"python {PROBE} 0 20 {ready}",
        cwd=tmp_path,
    )
    try:
        _wait_phase(uri, cid, "running", proc)
        # The probe's pinned tasks ran on both nodes; it is sleeping now.
        _wait_file(ready, proc)
        assert ready.read_text() == "2\n"
        _crash_rank(cid, 1)
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        summary = read_json(tmp_path / "res" / cid / "deploy.json")
        assert summary["lost_ranks"] == [1], summary
        assert read_json(tmp_path / "res" / cid / "result.json")["nodes"] == 2
        assert_nothing_left(cid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        _reap(cid)


@pytest.mark.cluster
def test_losing_the_head_fails_the_run_in_one_line_and_leaves_nothing(
    syndeo_home: Path, tmp_path: Path
) -> None:
    cid = "tlosth"
    uri = (syndeo_home / "rendezvous").resolve().as_uri()
    proc = start_syndeo(
        "deploy",
        "--target",
        "local",
        "--nodes",
        "2",
        "--cluster-id",
        cid,
        "--results-dir",
        str(tmp_path / "res"),
        "--join-timeout",
        "240",
        "--run",
        f"python {PROBE} 0 120",
        cwd=tmp_path,
    )
    try:
        _wait_phase(uri, cid, "running", proc)
        _crash_rank(cid, 0)
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode != 0
        assert "Traceback" not in err
        lines = [ln for ln in err.splitlines() if ln.startswith("syndeo: error:")]
        assert len(lines) == 1 and cid in lines[0], err[-3000:]
        assert_nothing_left(cid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        _reap(cid)


@pytest.mark.parametrize("target", ["local", "slurm"])
@pytest.mark.parametrize("front", ["syndeo", "invoke"])
def test_dry_run_never_prints_a_credential(
    target: str, front: str, syndeo_home: Path, tmp_path: Path
) -> None:
    secrets = {
        "AWS_ACCESS_KEY_ID": "AKIASENTINEL0000",
        "AWS_SECRET_ACCESS_KEY": "sentinel-aws-secret",
        "AWS_SESSION_TOKEN": "sentinel-aws-session",
        "RAY_AUTH_TOKEN": "sentinel-ray-token",
        "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=sentinel-azure-key;",
        "AZURE_STORAGE_KEY": "sentinel-azure-key2",
        "GOOGLE_APPLICATION_CREDENTIALS": "/x/sentinel.json",
    }
    for uri in ("s3://bucket/p", "az://container/p", "gs://bucket/p"):
        args = [
            "deploy",
            "--dry-run",
            "--target",
            target,
            "--cluster-id",
            "dry",
            "--rendezvous",
            uri,
        ]
        if front == "syndeo":
            proc = syndeo(*args, cwd=tmp_path, env=secrets)
        else:
            proc = invoke(*args, cwd=tmp_path, env=secrets)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "SYNDEO_RENDEZVOUS" in proc.stdout  # it did print the plan
        for value in secrets.values():
            assert value not in proc.stdout + proc.stderr, (uri, value)


@pytest.mark.cluster
def test_head_refuses_tokenless_clients_on_every_port_and_logs_no_token(
    syndeo_home: Path, tmp_path: Path
) -> None:
    """Every TCP port of every node process: HTTP -> 401, gRPC -> UNAUTHENTICATED.

    The one exception Ray does not let us close is a metrics exporter (Prometheus
    text, no API); it must at least listen on loopback only.  With the token, each
    port serves (the probe reaches the auth check, not a dead end).  Afterwards the
    token appears in no node log and no Ray log file.
    """
    from tests.support import ports

    cid = "tports"
    keep = {"SYNDEO_KEEP_SCRATCH": "1"}  # keep Ray's session logs to search them
    uri = (syndeo_home / "rendezvous").resolve().as_uri()
    key = zlib.crc32(f"{uri}|{cid}".encode())
    scratch = Path(f"/tmp/syndeo-{os.getuid()}/{key:08x}")
    try:
        up = syndeo("up", "--nodes", "2", "--cluster-id", cid, cwd=tmp_path, env=keep, timeout=400)
        assert up.returncode == 0, up.stderr[-3000:]
        token = (syndeo_home / "clusters" / cid / "token").read_text().strip()
        answers = []
        for rank in ("0", "1"):
            procs = [p for p in processes_of(cid) if p.environ().get("SYNDEO_RANK") == rank]
            for (ip, port), owner in sorted(ports.listening_ports(procs).items()):
                answers.append((rank, ports.probe(ip, port, owner, token)))
        table = "\n".join(f"r{r} {a}" for r, a in answers)
        assert len(answers) >= 5, table  # GCS, raylet, dashboard, agents, client server
        for _rank, a in answers:
            if a.protocol == "http" and a.without_token.endswith("metrics"):
                assert a.ip in ("127.0.0.1", "::ffff:127.0.0.1"), table
            elif a.protocol == "http":
                assert a.without_token == "401", table
                assert a.with_token != "401", table
            else:
                assert a.without_token.endswith("=UNAUTHENTICATED"), table
                assert not a.with_token.endswith(("=UNAUTHENTICATED", "UNIMPLEMENTED")), table
        down = syndeo("down", "--cluster-id", cid, cwd=tmp_path, env=keep)
        assert down.returncode == 0, down.stderr[-3000:]
        logs = [*(syndeo_home / "clusters" / cid).glob("*.log"), *scratch.rglob("*")]
        files = [f for f in logs if f.is_file() and not f.is_symlink() and f.name != "token"]
        assert any("session_" in str(f) for f in files), "no Ray log files found"
        leaked = [str(f) for f in files if token.encode() in f.read_bytes()]
        assert not leaked, f"the token is written in {leaked}"
    finally:
        syndeo("down", "--cluster-id", cid, cwd=tmp_path)  # a no-op after a clean down
        _reap(cid)
        shutil.rmtree(scratch, ignore_errors=True)
