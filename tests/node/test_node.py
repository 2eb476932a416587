"""`syndeo node` on its own: deadlines, stale records, bad environment, file permissions."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from syndeo import __version__
from syndeo.core.errors import ConfigError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.rendezvous import HeadRecord, open_rendezvous
from tests.support.helpers import run_node


def _node_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    scratch = Path(f"/tmp/syndeo-test-{os.getpid()}")
    env = {
        "SYNDEO_CLUSTER_ID": "nodetest",
        "SYNDEO_RANK": "1",
        "SYNDEO_NODES": "2",
        "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "3",
    }
    env.update(extra)
    return env


def _run_node(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_node(env, timeout=60)


def _head(cluster_id: str, attempt: int = 0, created_at: float | None = None) -> HeadRecord:
    return HeadRecord(
        cluster_id=cluster_id,
        attempt=attempt,
        ip="127.0.0.1",
        gcs_port=9,
        ray_version="x",
        syndeo_version=__version__,
        nonce="n",
        created_at=time.time() if created_at is None else created_at,
        hostname="h",
    )


def test_worker_without_head_fails_with_a_clear_error(tmp_path: Path) -> None:
    proc = _run_node(_node_env(tmp_path))
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "no head for cluster 'nodetest' appeared" in proc.stderr
    assert "within 3 s" in proc.stderr


def test_stale_head_records_are_ignored(tmp_path: Path) -> None:
    env = _node_env(tmp_path, SYNDEO_ATTEMPT="1", SYNDEO_NOT_BEFORE=str(time.time()))
    uri = env["SYNDEO_RENDEZVOUS"]
    # attempt 0 of the same cluster (a requeued job's first run): must not be used
    open_rendezvous(uri, "nodetest", attempt=0).publish_head(_head("nodetest", 0))
    # right attempt, but published an hour before this launch: stale
    stale = open_rendezvous(uri, "nodetest", attempt=1)
    stale.publish_head(_head("nodetest", 1, created_at=time.time() - 3600))
    # a record of another cluster id copied into our place is not ours either
    (Path(uri.removeprefix("file://")) / "other" / "a1").mkdir(parents=True)
    forged = _head("other", 1).model_dump_json()
    (Path(uri.removeprefix("file://")) / "other" / "a1" / "head.json").write_text(forged)
    proc = _run_node(env)
    assert proc.returncode == 3, proc.stderr
    assert "no head for cluster 'nodetest' appeared" in proc.stderr


def test_head_record_of_another_cluster_is_not_read(tmp_path: Path) -> None:
    rdv = open_rendezvous((tmp_path / "rdv").as_uri(), "mine")
    path = tmp_path / "rdv" / "mine" / "a0"
    path.mkdir(parents=True)
    (path / "head.json").write_text(_head("theirs").model_dump_json())
    assert rdv.read_head() is None


@pytest.mark.parametrize(
    ("drop", "change", "message"),
    [
        ("SYNDEO_CLUSTER_ID", {}, "SYNDEO_CLUSTER_ID is required"),
        (None, {"SYNDEO_RANK": "-1"}, "SYNDEO_RANK Input should be greater than or equal to 0"),
        (None, {"SYNDEO_NODES": "many"}, "SYNDEO_NODES Input should be a valid integer"),
        (None, {"SYNDEO_SCRATCH": "/tmp/" + "x" * 60}, "SYNDEO_SCRATCH Value error"),
        (
            None,
            {"SYNDEO_SCRATCH_BASE": "/var/tmp"},
            # {scratch}: this process's own (a parameter naming it would differ between
            # the parallel workers, which must collect the same tests).
            "SYNDEO_SCRATCH_BASE '/var/tmp' is not a parent directory of SYNDEO_SCRATCH "
            "'{scratch}'",
        ),
        (None, {"SYNDEO_CLUSTER_ID": "Bad_Id"}, "SYNDEO_CLUSTER_ID Value error"),
        (None, {"SYNDEO_RENDEZVOUS": "ftp://x/y"}, "unsupported rendezvous URI 'ftp://x/y'"),
        (None, {"SYNDEO_RENDEZVOUS": "file:///proc/nope"}, "cannot create rendezvous directory"),
    ],
)
def test_bad_node_environment_is_one_line(
    tmp_path: Path, drop: str | None, change: dict[str, str], message: str
) -> None:
    env = _node_env(tmp_path, **change)
    full = {**os.environ, **env}
    if drop:
        full.pop(drop)
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo", "node"],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("syndeo: error:"), proc.stderr
    assert message.replace("{scratch}", env["SYNDEO_SCRATCH"]) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_settings_round_trip_through_the_environment(tmp_path: Path) -> None:
    s = NodeSettings(
        cluster_id="c1",
        rank=2,
        nodes=3,
        rendezvous="file:///x",
        scratch=Path("/tmp/s"),
        cpus=4,
        run="python a.py --flag 'two words'",
        not_before=12.5,
    )
    assert NodeSettings.from_env(s.to_env()) == s
    with pytest.raises(ConfigError, match="SYNDEO_NODES is required"):
        NodeSettings.from_env({k: v for k, v in s.to_env().items() if k != "SYNDEO_NODES"})


def test_file_rendezvous_keeps_secrets_owner_only(tmp_path: Path) -> None:
    rdv = open_rendezvous((tmp_path / "rdv").as_uri(), "perm")
    rdv.check()
    rdv.put_secret("token", b"s3cret")
    rdv.publish_head(_head("perm"))
    root = tmp_path / "rdv" / "perm"
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
    assert rdv.get_secret("token") == b"s3cret"
    assert not list(root.rglob(".tmp-*"))  # no temp files left behind


@pytest.mark.cluster
def test_head_ignores_a_stale_address_left_in_a_reused_scratch(tmp_path: Path) -> None:
    # A requeued job or a repeated cluster id can reuse a scratch dir that still holds
    # the previous Ray's address file; the head must publish its own new address.
    env = _node_env(
        tmp_path,
        SYNDEO_RANK="0",
        SYNDEO_NODES="1",
        SYNDEO_JOIN_TIMEOUT="120",
        SYNDEO_RUN=f"{sys.executable} -c 'import ray; ray.init(); print(\"CONNECTED\")'",
        SYNDEO_MEMORY_MB="1024",
        SYNDEO_OBJECT_STORE_MB="100",
    )
    stale = Path(env["SYNDEO_SCRATCH"]) / "r" / "ray_current_cluster"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("127.0.0.10:1")
    proc = subprocess.run(
        [sys.executable, "-m", "syndeo", "node"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "CONNECTED" in proc.stdout
    assert "127.0.0.10:1 " not in proc.stderr
