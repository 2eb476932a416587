"""``status``: every cluster of this user on this machine, against golden files.

The clusters are what ``up`` would leave: ``launched.json`` files in a private
SYNDEO_HOME and, for each, a ``file://`` rendezvous holding the head's status and job
records, written through the real :class:`Rendezvous` API (the demand record signed as
the head signs it).  The clock is fixed, so the files are stable; after an intended
change regenerate them with ``SYNDEO_UPDATE_GOLDEN=1 pytest tests/launcher/test_status.py``
and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from syndeo.core import launchkey
from syndeo.core.groups import GroupConfig, Layout, build_layout
from syndeo.launcher.spec import ClusterSpec, Launched, LedgerEntry
from syndeo.launcher.state import cluster_dir, load_launched, save_launched
from syndeo.launcher.status import clusters
from syndeo.rendezvous import JobSpec, JobState, NodeRecord, StatusRecord, open_rendezvous
from syndeo.rendezvous.base import SCALE_PURPOSE, DemandRecord
from tests.support.helpers import ROOT, one_line_error, syndeo
from tests.support.launched import make_launched

GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = 1_800_000_000.0
KEY = "5a" * 32  # a launch key: 64 hex digits


def invoke(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _layout(*groups: GroupConfig) -> Layout:
    return build_layout(list(groups), head="own", cpus=1, gpus=0, memory_mb=None, container=None)


def _spec(
    cid: str, target: str, rdv: str, layout: Layout | None = None, t: float = NOW
) -> ClusterSpec:
    fields: dict[str, Any] = dict(
        target=target,
        cluster_id=cid,
        rendezvous=rdv,
        nodes=layout.nodes if layout else 2,
        cpus=1,
        gpus=0,
        memory_mb=None,
        object_store_mb=None,
        join_timeout=300.0,
        run="",
        workdir=Path("/work"),
        image=None,
        not_before=t - 3725,
        layout=layout,
        launch_key=KEY,
    )
    return ClusterSpec(**fields)


def _save(
    spec: ClusterSpec, started_at: float, part: dict[str, Any] | None = None, **common: Any
) -> Launched:
    launched = make_launched(
        spec.target, spec.cluster_id, spec.rendezvous, started_at, part, spec=spec, **common
    )
    save_launched(launched)
    return launched


def _demand(
    spec: ClusterSpec, idle_since: float | None, t: float, signed: bool = True
) -> DemandRecord:
    """The head's record as syndeo/node/autoscale.py signs it (or unsigned)."""
    record = DemandRecord(
        cluster_id=spec.cluster_id, attempt=0, want={}, idle_since=idle_since, at=t - 2
    )
    if not signed:
        return record
    fields = record.model_dump(mode="json", exclude={"signature"})
    return record.model_copy(
        update={"signature": launchkey.sign_record(KEY, SCALE_PURPOSE, fields)}
    )


def _serving(
    spec: ClusterSpec, joined: list[int], groups: dict[str, list[int]], demand: Any, t: float
) -> None:
    rdv = open_rendezvous(spec.rendezvous, spec.cluster_id)
    record = StatusRecord(
        phase="serving",
        nodes_expected=spec.nodes,
        nodes_joined=joined,
        updated_at=t - 2,
        groups=groups,
        demand=demand,
    )
    rdv.publish_status(record)


def _job(spec: ClusterSpec, job_id: str, state: str, t: float) -> None:
    rdv = open_rendezvous(spec.rendezvous, spec.cluster_id)
    job = JobSpec(
        job_id=job_id,
        cluster_id=spec.cluster_id,
        attempt=0,
        command=["python", "x.py"],
        submitted_at=t - 100,
    )
    rdv.submit_job(job.signed(KEY))
    rdv.put_job_state(JobState(job_id=job_id, state=state, started_at=t - 90))


def _local_autoscaled(rdv: str, t: float) -> None:
    """worker 2 of 0..3, idle 40 s with autostop after 60 s: autostop in 20 s."""
    layout = _layout(GroupConfig(name="worker", max_nodes=3))
    spec = _spec("local-auto", "local", rdv, layout, t)
    me = psutil.Process()
    _save(spec, t - 3725, autostop_s=60.0, watcher={"pid": me.pid, "create_time": me.create_time()})
    _serving(spec, [0, 1, 2], {"head": [1, 1], "worker": [2, 0]}, _demand(spec, t - 40, t), t)
    _job(spec, "j00001-aaaaaa", "succeeded", t)  # not read: the head says it is idle


def _local_unsigned(rdv: str, t: float) -> None:
    """A demand record nobody signed (planted): idle unknown; so the jobs are read."""
    spec = _spec("local-unsigned", "local", rdv, t=t)
    _save(spec, t - 600, autostop_s=1800.0)
    _serving(spec, [0, 1], {}, _demand(spec, t - 500, t, signed=False), t)
    _job(spec, "j00001-bbbbbb", "running", t)
    _job(spec, "j00002-bbbbbb", "succeeded", t)


def _aws_priced(rdv: str, t: float) -> None:
    """On-demand c7i.xlarge head for 2 h, a c6i.2xlarge worker the autoscaler added
    30 min ago (its node record): $0.357 + $0.17 so far, $0.5185 per hour."""
    layout = _layout(GroupConfig(name="worker", max_nodes=4, aws={"instance_type": "c6i.2xlarge"}))
    spec = _spec("aws-priced", "aws", rdv, layout, t)
    workspace = cluster_dir(spec.cluster_id) / "terraform"
    machines = {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "c7i.xlarge",
        "count": 1,
        "spot": False,
        "groups": [
            {"name": "head", "instance_type": "c7i.xlarge", "count": 1},
            {"name": "worker", "instance_type": "c6i.2xlarge", "count": 0},
        ],
    }
    part = {
        "machines": machines,
        "apply_started": t - 7200,
        "module_dir": str(ROOT / "terraform" / "aws" / "deploy"),
        "workspace": str(workspace),
    }
    _save(spec, t - 7200, part)
    workspace.mkdir()  # the cluster's tfvars: what Target.added reads
    grown = {"node": {"node_count": 1, "grown": [{"rank": 1, "group": "worker"}]}}
    (workspace / "terraform.tfvars.json").write_text(json.dumps(grown))
    _serving(spec, [0, 1], {"head": [1, 1], "worker": [1, 0]}, _demand(spec, None, t), t)
    rdv_ = open_rendezvous(rdv, spec.cluster_id)
    rdv_.register_node(
        NodeRecord(
            cluster_id=spec.cluster_id,
            rank=1,
            hostname="w1",
            ip="10.0.0.2",
            pid=7,
            joined_at=t - 1800,
        )
    )


def _gcp_unpriced(rdv: str, t: float) -> None:
    """An instance type the catalog has no price for: "unpriced", never a guess."""
    spec = _spec("gcp-unpriced", "gcp", rdv, t=t)
    machines = {
        "provider": "gcp",
        "region": "us-central1",
        "instance_type": "n9-imaginary-4",
        "count": 2,
        "spot": False,
    }
    _save(spec, t - 90000, {"machines": machines, "apply_started": t - 90000})
    _serving(spec, [0, 1], {}, _demand(spec, None, t), t)


def _gone(tmp_path: Path, t: float) -> None:
    """Its rendezvous is gone (a store removed under it): unreachable, one line."""
    spec = _spec("local-gone", "local", (tmp_path / "removed").as_uri(), t=t)
    _save(spec, t - 7200)


def _write_clusters(tmp_path: Path, t: float) -> None:
    """Five clusters as they stand at ``t``, each its own case."""
    rdv = (tmp_path / "rdv").as_uri()
    _local_autoscaled(rdv, t)
    _local_unsigned(rdv, t)
    _aws_priced(rdv, t)
    _gcp_unpriced(rdv, t)
    _gone(tmp_path, t)


@pytest.fixture
def home_with_clusters(syndeo_home: Path, tmp_path: Path) -> Path:
    _write_clusters(tmp_path, NOW)
    return syndeo_home


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SYNDEO_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"golden file {path} missing: run with SYNDEO_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"status differs from {path}"


def test_the_table_and_the_json_match_their_golden_files(home_with_clusters: Path) -> None:
    from syndeo.cli.status import render_json, render_table

    rows = clusters(now=NOW)
    _golden("status.txt", render_table(rows))
    _golden("status.json", render_json(rows))
    by_id = {r.cluster_id: r for r in rows}
    auto = by_id["local-auto"]
    assert [(g.name, g.now, g.min, g.max) for g in auto.groups] == [
        ("head", 1, 1, 1),
        ("worker", 2, 0, 3),
    ]
    assert (auto.idle_s, auto.autostop_in_s, auto.watcher) == (40.0, 20.0, True)
    assert auto.store_requests == 1  # its status only: an idle head runs no job
    unsigned = by_id["local-unsigned"]
    assert (unsigned.idle_s, unsigned.idle_signed, unsigned.jobs_running) == (None, False, 1)
    assert unsigned.store_requests == 6  # status, the list of jobs, 2 records x 2 jobs
    aws = by_id["aws-priced"]
    assert (aws.usd_so_far, aws.usd_per_h) == (pytest.approx(0.527), pytest.approx(0.5185))
    assert by_id["gcp-unpriced"].usd_per_h is None
    assert "n9-imaginary-4" in str(by_id["gcp-unpriced"].unpriced)
    assert (by_id["local-gone"].state, by_id["local-gone"].groups[0].now) == ("unreachable", None)


def test_a_store_that_fails_is_one_line_and_the_rest_are_shown(
    home_with_clusters: Path,
) -> None:
    spec = _spec("local-nostore", "local", "nosuch://bucket/prefix")
    _save(spec, NOW - 60)
    rows = {r.cluster_id: r for r in clusters(now=NOW)}
    broken = rows["local-nostore"]
    assert broken.state == "unreachable" and broken.error and "\n" not in broken.error
    assert rows["local-auto"].state == "serving"
    (cluster_dir("local-bad") / "launched.json").write_text("{not json")
    assert {r.cluster_id: r.state for r in clusters(now=NOW)}["local-bad"] == "unreadable"


def test_status_of_one_cluster_and_of_one_that_is_not_there(home_with_clusters: Path) -> None:
    rows = clusters("local-auto", now=NOW)
    assert [r.cluster_id for r in rows] == ["local-auto"]
    proc = syndeo("status", "--cluster-id", "nope", cwd=ROOT)
    assert "no cluster 'nope' is up" in one_line_error(proc)


def test_invoke_status_as_the_docs_show_it(syndeo_home: Path, tmp_path: Path) -> None:
    """``invoke status`` and ``invoke status --json`` (docs/jobs.md), on the real clock."""
    _write_clusters(tmp_path, time.time())
    table = invoke("status", cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-2000:]
    for cid in ("local-auto", "local-unsigned", "aws-priced", "gcp-unpriced", "local-gone"):
        assert cid in table.stdout
    assert "unreachable" in table.stdout and "unpriced" in table.stdout
    listed = json.loads(invoke("status", "--json", cwd=tmp_path).stdout)
    assert [r["cluster_id"] for r in listed] == sorted(r["cluster_id"] for r in listed)
    assert all(set(r) == set(listed[0]) for r in listed)  # the same keys on every row
    auto = next(r for r in listed if r["cluster_id"] == "local-auto")
    worker = next(g for g in auto["groups"] if g["name"] == "worker")
    assert (worker["now"], worker["min"], worker["max"]) == (2, 0, 3)
    one = invoke("status", "--cluster-id", "local-auto", cwd=tmp_path)
    assert "local-auto" in one.stdout and "local-gone" not in one.stdout


def test_no_cluster_is_one_line(syndeo_home: Path, tmp_path: Path) -> None:
    proc = syndeo("status", cwd=tmp_path)
    assert proc.returncode == 0 and "no cluster is up" in proc.stderr
    assert json.loads(syndeo("status", "--json", cwd=tmp_path).stdout) == []


def test_a_head_that_stopped_publishing_is_shown_silent() -> None:
    from syndeo.cli.status import render_table
    from syndeo.launcher.status import ClusterStatus

    row = ClusterStatus(cluster_id="quiet", target="local", state="serving", status_age_s=303.0)
    assert "serving (silent 5m 03s)" in render_table([row])


def test_cost_so_far_counts_the_nodes_that_came_and_went(syndeo_home: Path, tmp_path: Path) -> None:
    """The priced AWS cluster above, whose ledger (what the watcher notes) also holds a
    worker started 60 min ago and let go 40 min ago: its 20 min at $0.34/h are part of
    the cost so far, and the worker running now counts from its start request 35 min
    ago, not from its join 30 min ago.  The price per hour is what runs now."""
    _aws_priced((tmp_path / "rdv").as_uri(), NOW)
    launched = load_launched("aws-priced")
    launched.ledger = [
        LedgerEntry(group="worker", rank=2, start=NOW - 3600, end=NOW - 2400),
        LedgerEntry(group="worker", rank=1, start=NOW - 2100),
    ]
    save_launched(launched)
    row = clusters("aws-priced", now=NOW)[0]
    head, worker = 0.1785 * 2, 0.34 * (35 + 20) / 60
    assert row.usd_so_far == pytest.approx(head + worker, abs=1e-4)
    assert row.usd_per_h == pytest.approx(0.5185)
