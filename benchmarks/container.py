"""Benchmark: the Syndeo image vs bare, side by side (run as root; nodes run as syndeo-ci).

    .venv/bin/python -m benchmarks.container --sif SIF [--rounds 3]

Measures (JSON to results/container-bench.json):
- container start: `apptainer exec SIF true`, and `python -c "import ray"` inside vs bare;
- a local cluster (`deploy --target local`) of NODES nodes running the rollout benchmark,
  container and bare interleaved ABBA: throughput (steps/s) and time until all joined.
Timings are noisy on a shared 2-core VM: compare ratios over rounds, not single runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from syndeo.image.inputs import REPO
from syndeo.image.manifest import load_manifest
from testbeds.launch import deploy_as, launcher_python

USER = os.environ.get("SYNDEO_BUILD_USER", "syndeo-ci") if os.geteuid() == 0 else None


def _as_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *argv] if USER else argv


def _time(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(_as_user(argv), check=True, capture_output=True)
    return time.perf_counter() - started


def start_costs(sif: Path, repeats: int) -> dict[str, Any]:
    exec_ = ["apptainer", "exec", "--containall", "--cleanenv", str(sif)]
    bare_py = launcher_python(USER)
    rows: dict[str, list[float]] = {
        "exec_true": [],
        "import_ray_container": [],
        "import_ray_bare": [],
    }
    for _ in range(repeats):
        rows["exec_true"].append(_time([*exec_, "true"]))
        rows["import_ray_container"].append(_time([*exec_, "python", "-c", "import ray"]))
        rows["import_ray_bare"].append(_time([bare_py, "-c", "import ray"]))
    return {k: {"median_s": statistics.median(v), "runs_s": v} for k, v in rows.items()}


def cluster_run(sif: Path | None, work: Path, nodes: int, samples: int, tag: str) -> dict[str, Any]:
    cid = f"cb{tag}"
    args = [
        "--target",
        "local",
        "--nodes",
        str(nodes),
        "--cluster-id",
        cid,
        "--results-dir",
        str(work / "res"),
        "--samples-per-cpu",
        str(samples),
        "--repeats",
        "3",
        "--join-timeout",
        "300",
    ]
    if sif is not None:
        args += ["--container", str(sif)]
    proc = deploy_as(USER, args, cwd=work, home=work / "home", timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{tag} failed: {proc.stderr[-2000:]}")
    result = json.loads((work / "res" / cid / "result.json").read_text())
    deploy = json.loads((work / "res" / cid / "deploy.json").read_text())
    return {
        "steps_per_s": result["results"][0]["syndeo"]["mean"],
        "all_joined_s": deploy["timings_s"]["all_joined_s"],
        "total_s": deploy["timings_s"]["teardown_done_s"],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sif", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--samples-per-cpu", type=int, default=40000)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "container-bench.json")
    a = parser.parse_args()
    sif = a.sif.resolve()
    work = Path(tempfile.mkdtemp(prefix="syndeo-bench-", dir="/var/tmp"))
    os.chmod(work, 0o755)
    if USER:
        shutil.chown(work, USER)
    report: dict[str, Any] = {"sif": str(sif), "manifest": None, "nodes": a.nodes}
    manifest = load_manifest(sif)
    if manifest is not None:
        report["manifest"] = manifest.model_dump()
    report["start"] = start_costs(sif, 5)
    runs: list[dict[str, Any]] = []
    for i in range(a.rounds):
        order = ["bare", "container"] if i % 2 == 0 else ["container", "bare"]  # ABBA
        for kind in order:
            row = cluster_run(
                sif if kind == "container" else None,
                work,
                a.nodes,
                a.samples_per_cpu,
                f"{i}{kind[0]}",
            )
            runs.append({"round": i, "kind": kind, **row})
            print(json.dumps(runs[-1]), flush=True)
    report["cluster_runs"] = runs
    by = {k: [r for r in runs if r["kind"] == k] for k in ("bare", "container")}
    ratios = [
        c["steps_per_s"] / b["steps_per_s"]
        for b, c in zip(by["bare"], by["container"], strict=True)
    ]
    report["throughput_ratio_container_over_bare"] = {
        "per_round": ratios,
        "mean": statistics.fmean(ratios),
        "median": statistics.median(ratios),
    }
    report["all_joined_s_median"] = {
        k: statistics.median(r["all_joined_s"] for r in v) for k, v in by.items()
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print(
        json.dumps(
            {k: report[k] for k in ("throughput_ratio_container_over_bare", "all_joined_s_median")},
            indent=1,
        )
    )
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
