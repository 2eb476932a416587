"""Hand-sized result directories: deploy.json + result.json per cluster, like deploy writes."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from syndeo.bench.models import BenchConfig, BenchResult, EnvResult, Manifest, Repeat, Series
from syndeo.compare.settings import CostSettings, OnPremCost

ROOT = Path(__file__).resolve().parents[2]
FRONT_ENDS = {
    "invoke": [sys.executable, "-m", "invoke", "-r", str(ROOT), "compare"],
    "syndeo": [sys.executable, "-m", "syndeo", "compare"],
}


def run(front: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FRONT_ENDS[front], *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode != 0, p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert lines[0].startswith("syndeo: error: ")
    return lines[0]


# A user catalog (no cloud in its name, so it has a provider column): x1 is measured in
# the fixture results, y1 never is.  y1 has no spot price.
CATALOG_CSV = """\
provider,instance_type,vcpus,memory_gib,region,ondemand_usd_per_h,spot_usd_per_h,\
relative_speed,vcpus_per_core,source,as_of
aws,x1.fixture,4,8,us-east-1,0.5,0.2,1.0,2,test fixture,2026-11-22
aws,y1.fixture,8,16,us-east-1,0.8,,1.5,2,test fixture,2026-11-22
"""

# [cost.onprem] chosen so the CPU-hour is round:
# (8760 $ / (1 y x 8760 h x 1.0) + 1000 W / 1000 x 0.1 $/kWh) x (1 + 0) / 2 CPUs
#   = (1.0 + 0.1) / 2 = 0.55 $/CPU-hour
CONFIG_TOML = """[cost.onprem]
capex_usd_per_node = 8760
amortisation_years = 1
utilisation = 1.0
power_w_per_node = 1000
usd_per_kwh = 0.1
admin_share = 0
cores_per_node = 2
"""


Repeats = list[tuple[int, float]]  # (samples, seconds) per repeat


def env_result(env: str, workers: int, repeats: Repeats) -> EnvResult:
    reps = [Repeat(samples=s, seconds=t, steps_per_s=s / t) for s, t in repeats]
    mean = sum(r.steps_per_s for r in reps) / len(reps)
    return EnvResult(
        env_id=env,
        env_name=env.split("-")[0],
        mode="count",
        workers=workers,
        envs_per_actor=16,
        samples_requested=sum(s for s, _ in repeats),
        samples_counted=sum(s for s, _ in repeats),
        syndeo=Series(method="syndeo", repeats=reps, mean=mean, std=0.0),
    )


def bench_result(
    target: str,
    nodes: int,
    cpus: int,
    repeats: Repeats | dict[str, Repeats],
    env: str = "CartPole-v1",
    cpu_model: str = "Fixture CPU",
) -> BenchResult:
    """One benchmark result; ``repeats`` per env id for a run of several envs."""
    per_env = repeats if isinstance(repeats, dict) else {env: repeats}
    return BenchResult(
        manifest=Manifest(
            target=target,
            cluster_nodes=nodes,
            cluster_cpus=cpus,
            cpu_model=cpu_model,
            hostname="fixture",
            versions={"ray": "2.60.0"},
            image_digest=None,
            git_commit=None,
            started_at="2026-11-22T20:00:00+00:00",
            finished_at="2026-11-22T20:01:00+00:00",
            load_avg_1m=[0.5, 0.6],
        ),
        config=BenchConfig(envs=list(per_env)),
        results=[env_result(e, cpus, reps) for e, reps in per_env.items()],
    )


def write_run(
    results: Path,
    cluster_id: str,
    target: str,
    nodes: int,
    cpus_per_node: int,
    repeats: Repeats | dict[str, Repeats],
    teardown_s: float,
    extra: dict[str, Any] | None = None,
    cpu_model: str = "Fixture CPU",
) -> Path:
    d = results / cluster_id
    d.mkdir(parents=True)
    res = bench_result(target, nodes, nodes * cpus_per_node, repeats, cpu_model=cpu_model)
    (d / "result.json").write_text(res.model_dump_json(indent=2))
    summary: dict[str, Any] = {
        "cluster_id": cluster_id,
        "target": target,
        "nodes": nodes,
        "cpus_per_node": cpus_per_node,
        "workload": "python -m syndeo.bench run",
        "exit_code": 0,
        "message": "workload finished",
        "lost_ranks": [],
        "timings_s": {
            "all_joined_s": 5.0,
            "workload_done_s": teardown_s - 2,
            "head_exit_s": teardown_s - 1,
            "teardown_done_s": teardown_s,
        },
        "result": str(d / "result.json"),
    }
    summary.update(extra or {})
    (d / "deploy.json").write_text(json.dumps(summary, indent=2))
    return d


def standard(tmp: Path) -> tuple[Path, Path, Path]:
    """results/, catalog.csv, config.toml of the hand-worked example (see test_figures)."""
    results = tmp / "results"
    # local 1 x 2 CPUs: 2000 samples in 2 s, 2400 in 2 s -> 1000, 1200 steps/s
    write_run(results, "local-a", "local", 1, 2, [(2000, 2.0), (2400, 2.0)], 36.0)
    # local 2 x 2 CPUs: 2000, 2200 steps/s
    write_run(results, "local-b", "local", 2, 2, [(4000, 2.0), (4400, 2.0)], 72.0)
    # aws 2 x x1.fixture (4 vCPUs each): 4000, 4400 steps/s; 1800 instance-seconds in all
    machines = {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "x1.fixture",
        "count": 2,
        "spot": False,
        "instance_seconds": 1800.0,
    }
    write_run(
        results, "aws-c", "aws", 2, 4, [(8000, 2.0), (8800, 2.0)], 900.0, {"machines": machines}
    )
    catalog = tmp / "catalog.csv"
    catalog.write_text(CATALOG_CSV)
    config = tmp / "config.toml"
    config.write_text(CONFIG_TOML)
    return results, catalog, config


def edit_json(path: Path, change: Any) -> None:
    """Rewrite a JSON file after ``change(doc)`` (a result or summary gone wrong).  Python's
    json writes NaN and Infinity, as any file may contain."""
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def fixture_onprem() -> OnPremCost:
    """CONFIG_TOML's [cost.onprem]: 0.55 $/CPU-hour."""
    return CostSettings.model_validate(tomllib.loads(CONFIG_TOML)["cost"]).onprem
