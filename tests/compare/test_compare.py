"""`compare`: exact figures from hand-sized fixtures, one-line errors, report, plan.

No Ray needed: results and deploy summaries are written the way deploy writes them,
and every command goes through the real front ends (`invoke compare`, `python -m syndeo`).
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from pathlib import Path

import pytest

from syndeo.compare.catalog import load_catalog
from syndeo.compare.errors import CompareError
from syndeo.compare.fit import fit_power_law
from syndeo.compare.plan import make_plan
from syndeo.compare.report import build_rows
from syndeo.compare.runs import find_runs
from syndeo.compare.settings import OnPremCost
from syndeo.launcher.config import load_config
from tests.compare.fixtures import FRONT_ENDS, one_line_error, run, standard, write_run


def rows_of(tmp_path: Path):  # type: ignore[no-untyped-def]
    results, catalog, config = standard(tmp_path)
    onprem = load_config(config).cost.onprem
    cat = load_catalog(catalog)
    return build_rows(find_runs(results).runs, cat, onprem), cat, onprem


# ------------------------------------------------------------------ exact figures
def test_onprem_core_hour_default_and_configured(tmp_path: Path) -> None:
    # Defaults: (12000 / (5 x 8760 x 0.6) + 600 / 1000 x 0.15) x 1.3 / 64
    #         = (0.4566210 + 0.09) x 1.3 / 64 = 0.7106073 / 64 = 0.01110324 $/core-h
    assert OnPremCost().core_hour_usd() == pytest.approx(0.0111032, rel=1e-5)
    # The fixture config: (8760 / (1 x 8760 x 1) + 1000 / 1000 x 0.1) x 1 / 2 = 0.55
    _, _, config = standard(tmp_path)
    assert load_config(config).cost.onprem.core_hour_usd() == pytest.approx(0.55)


def test_figures_worked_by_hand(tmp_path: Path) -> None:
    rows, _, _ = rows_of(tmp_path)
    by = {(r.target, r.nodes): r for r in rows}
    assert [(r.target, r.nodes) for r in rows] == [("aws", 2), ("local", 1), ("local", 2)]

    aws = by[("aws", 2)]
    # 8000/2 = 4000 and 8800/2 = 4400 steps/s: mean 4200, stdev sqrt(2 x 200²) = 282.84
    assert aws.mean == pytest.approx(4200)
    assert aws.std == pytest.approx(282.842712, rel=1e-6)
    assert aws.per_cpu == pytest.approx(525)  # 4200 / (2 x 4)
    # 2 instances x 0.5 $/h = 1.0 $/h; 1.0 / (4200 x 3600) x 1e6 = 0.0661376 $/M steps
    assert aws.price.usd_per_h == pytest.approx(1.0)
    assert aws.usd_per_m == pytest.approx(0.0661376, rel=1e-5)
    # all-in: 1800 instance-s / 3600 x 0.5 $/h = 0.25 $ over 16800 steps = 14.880952 $/M
    assert aws.allin_usd_per_m == pytest.approx(14.880952, rel=1e-6)
    # 1e9 / 4200 / 3600 = 66.1376 h
    assert aws.hours_to_billion == pytest.approx(66.137566, rel=1e-6)

    small = by[("local", 1)]
    # 2 cores x 0.55 = 1.1 $/h; 1000, 1200 -> mean 1100; 1.1 / (1100 x 3600) x 1e6 = 0.277778
    assert small.price.usd_per_h == pytest.approx(1.1)
    assert small.usd_per_m == pytest.approx(0.2777778, rel=1e-6)
    # all-in: 36 s / 3600 x 1.1 = 0.011 $ over 2000 + 2400 steps = 2.5 $/M
    assert small.allin_usd_per_m == pytest.approx(2.5)
    assert small.efficiency == pytest.approx(100)

    big = by[("local", 2)]
    # 4 cores x 0.55 = 2.2 $/h; mean 2100; 2.2 / (2100 x 3600) x 1e6 = 0.2910053
    assert big.usd_per_m == pytest.approx(0.2910053, rel=1e-6)
    # all-in: 72 / 3600 x 2.2 = 0.044 $ over 8400 steps = 5.2380952 $/M
    assert big.allin_usd_per_m == pytest.approx(5.2380952, rel=1e-6)
    # per CPU 2100 / 4 = 525 against 1100 / 2 = 550 -> 95.4545 %
    assert big.efficiency == pytest.approx(95.454545, rel=1e-6)


def test_spot_run_priced_at_spot(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    machines = {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "x1.fixture",
        "count": 1,
        "spot": True,
        "instance_seconds": 3600.0,
    }
    write_run(results, "aws-spot", "aws", 1, 4, [(4000, 2.0)], 100.0, {"machines": machines})
    rows = build_rows(find_runs(results).runs, load_catalog(catalog), OnPremCost())
    spot = next(r for r in rows if r.price.kind == "spot")
    # 1 x 0.2 $/h at 2000 steps/s: 0.2 / (2000 x 3600) x 1e6 = 0.0277778 $/M;
    # all-in 3600 s x 0.2 $/h = 0.2 $ over 4000 steps = 50 $/M
    assert spot.usd_per_m == pytest.approx(0.0277778, rel=1e-5)
    assert spot.allin_usd_per_m == pytest.approx(50.0)


def _grouped_machines(**changes: object) -> dict[str, object]:
    """deploy.json machines of a [[groups]] run on AWS: a head on x1.fixture, two
    y1.fixture nodes, and a group declared for later (no nodes, no price needed)."""
    machines: dict[str, object] = {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "x1.fixture",
        "count": 3,
        "spot": False,
        "instance_seconds": 1800.0,
        "groups": [
            {"name": "head", "instance_type": "x1.fixture", "count": 1},
            {"name": "gpu", "instance_type": "y1.fixture", "count": 2},
            {"name": "later", "instance_type": "z9.unpriced", "count": 0},
        ],
    }
    machines.update(changes)
    return machines


def test_grouped_run_priced_group_by_group(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    # 3 nodes x 4 CPUs: 6000 and 6600 samples in 2 s -> 3000, 3300 steps/s, mean 3150
    write_run(
        results,
        "aws-g",
        "aws",
        3,
        4,
        [(6000, 2.0), (6600, 2.0)],
        600.0,
        {"machines": _grouped_machines()},
    )
    rows = build_rows(find_runs(results).runs, load_catalog(catalog), OnPremCost())
    [g] = [r for r in rows if r.runs == ["aws-g"]]
    assert g.hardware == "x1.fixture+y1.fixture"
    assert g.price.basis == "1 x x1.fixture + 2 x y1.fixture on-demand at 0.5, 0.8 $/h"
    # 1 x 0.5 + 2 x 0.8 = 2.1 $/h; 2.1 / (3150 x 3600) x 1e6 = 0.1851852 $/M steps
    assert g.price.usd_per_h == pytest.approx(2.1)
    assert g.usd_per_m == pytest.approx(0.1851852, rel=1e-6)
    # all-in: 1800 instance-s over 3 instances = 600 s of the cluster: 600 / 3600 x 2.1
    # = 0.35 $ over 12600 steps = 27.777778 $/M
    assert g.allin_usd_per_m == pytest.approx(27.777778, rel=1e-6)


@pytest.mark.parametrize("front", FRONT_ENDS)
def test_grouped_run_missing_price_of_one_group(tmp_path: Path, front: str) -> None:
    results, catalog, _ = standard(tmp_path)
    groups = [
        {"name": "head", "instance_type": "x1.fixture", "count": 1},
        {"name": "gpu", "instance_type": "g9.unpriced", "count": 2},
    ]
    write_run(
        results,
        "aws-g",
        "aws",
        3,
        4,
        [(6000, 2.0)],
        60.0,
        {"machines": _grouped_machines(groups=groups)},
    )
    line = one_line_error(run(front, "--results", results, "--catalog", catalog, cwd=tmp_path))
    assert "no price for g9.unpriced in us-east-1 (aws)" in line


def test_grouped_run_counts_must_add_up(tmp_path: Path) -> None:
    results, _, _ = standard(tmp_path)
    write_run(
        results, "aws-g", "aws", 4, 4, [(6000, 2.0)], 60.0, {"machines": _grouped_machines(count=4)}
    )
    with pytest.raises(
        CompareError,
        match=r"aws-g/deploy.json is not a valid deploy summary: "
        r"machines: .*add up to 3, not to count 4",
    ):
        find_runs(results)


def test_grouped_run_in_the_report(tmp_path: Path) -> None:
    results, catalog, config = standard(tmp_path)
    write_run(
        results,
        "aws-g",
        "aws",
        3,
        4,
        [(6000, 2.0), (6600, 2.0)],
        600.0,
        {"machines": _grouped_machines()},
    )
    out = tmp_path / "report"
    p = run(
        "syndeo",
        "--results",
        results,
        "--catalog",
        catalog,
        "--config",
        config,
        "--out",
        out,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    md = (out / "report.md").read_text()
    # The row (3 nodes x 4 CPUs, 3150 steps/s, 2.10 $/h) and both types' catalog prices.
    assert "| aws | x1.fixture+y1.fixture | on-demand | 3 × 4 | 3,150 |" in md
    assert "| aws | y1.fixture | us-east-1 | 8 | 0.8 |" in md
    assert "| aws | x1.fixture | us-east-1 | 4 | 0.5 |" in md
    assert "z9.unpriced" not in md


# ------------------------------------------------------------------ one-line errors
@pytest.mark.parametrize("front", FRONT_ENDS)
def test_missing_price_names_type_and_region(tmp_path: Path, front: str) -> None:
    results, catalog, _ = standard(tmp_path)
    machines = {
        "provider": "gcp",
        "region": "europe-west4",
        "instance_type": "z9-fixture-8",
        "count": 1,
        "spot": False,
        "instance_seconds": 60.0,
    }
    write_run(results, "gcp-z", "gcp", 1, 8, [(8000, 2.0)], 60.0, {"machines": machines})
    line = one_line_error(run(front, "--results", results, "--catalog", catalog, cwd=tmp_path))
    assert "z9-fixture-8" in line and "europe-west4" in line and "no price" in line


@pytest.mark.parametrize("front", FRONT_ENDS)
def test_unknown_target(tmp_path: Path, front: str) -> None:
    results, _, _ = standard(tmp_path)
    write_run(results, "k8s-x", "kubernetes", 1, 2, [(2000, 2.0)], 10.0)
    line = one_line_error(run(front, "--results", results, cwd=tmp_path))
    assert "unknown target 'kubernetes'" in line and "k8s-x/deploy.json" in line


@pytest.mark.parametrize("front", FRONT_ENDS)
@pytest.mark.parametrize("which", ["result.json", "deploy.json"])
def test_corrupt_file_named(tmp_path: Path, front: str, which: str) -> None:
    results, _, _ = standard(tmp_path)
    bad = results / "local-b" / which
    bad.write_text(bad.read_text()[:40])  # a truncated write
    line = one_line_error(run(front, "--results", results, cwd=tmp_path))
    assert str(bad) in line and "not valid JSON" in line


def test_invalid_result_and_cloud_without_machines(tmp_path: Path) -> None:
    results, _, _ = standard(tmp_path)
    doc = json.loads((results / "local-a" / "result.json").read_text())
    doc["results"][0]["workers"] = "two"
    (results / "local-a" / "result.json").write_text(json.dumps(doc))
    with pytest.raises(CompareError, match=r"local-a/result.json is not a valid benchmark result"):
        find_runs(results)
    results2 = tmp_path / "r2"
    write_run(results2, "aws-old", "aws", 1, 4, [(4000, 2.0)], 10.0)
    with pytest.raises(CompareError, match=r"without machines\.instance_type/region"):
        find_runs(results2)


def test_bad_onprem_setting_and_catalog_line(tmp_path: Path) -> None:
    results, catalog, config = standard(tmp_path)
    config.write_text("[cost.onprem]\nutilisation = 1.5\n")
    line = one_line_error(run("invoke", "--results", results, "--config", config, cwd=tmp_path))
    assert "cost.onprem.utilisation" in line
    catalog.write_text(catalog.read_text().replace("0.8,,1.5", "free,,1.5"))
    line = one_line_error(run("syndeo", "--results", results, "--catalog", catalog, cwd=tmp_path))
    assert f"price catalog {catalog} line 3: ondemand_usd_per_h" in line


def test_failed_and_foreign_runs_are_noted_not_priced(tmp_path: Path) -> None:
    results, _, _ = standard(tmp_path)
    write_run(
        results,
        "local-f",
        "local",
        1,
        2,
        [(2000, 2.0)],
        10.0,
        {"exit_code": 3, "message": "1 of 2 workers joined"},
    )
    found = find_runs(results)
    assert {r.cluster_id for r in found.runs} == {"local-a", "local-b", "aws-c"}
    assert found.skipped == ["local-f: failed (exit 3): 1 of 2 workers joined"]


def test_standalone_result_is_priced_as_local(tmp_path: Path) -> None:
    from tests.compare.fixtures import bench_result

    results = tmp_path / "results"
    results.mkdir()
    res = bench_result("standalone", 1, 2, [(2000, 2.0)])
    (results / "bench-x.json").write_text(res.model_dump_json())
    [r] = find_runs(results).runs
    # started 20:00:00, finished 20:01:00 -> 60 s of wall time, all on the one size
    assert (r.target, r.cpus, r.wall_s) == ("local", 2, 60.0)


# ------------------------------------------------------------------ the report
def _png_size(data: bytes) -> tuple[int, int]:
    import matplotlib.image

    img = matplotlib.image.imread(io.BytesIO(data), format="png")
    return int(img.shape[1]), int(img.shape[0])


def test_report_renders_with_stated_png_sizes(tmp_path: Path) -> None:
    results, catalog, config = standard(tmp_path)
    out = tmp_path / "report"
    p = run(
        "invoke",
        "--results",
        results,
        "--catalog",
        catalog,
        "--config",
        config,
        "--out",
        out,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    # The terminal table, cheapest first.
    assert p.stdout.index("x1.fixture") < p.stdout.index("Fixture CPU")
    md = (out / "report.md").read_text()
    assert (
        "| aws | x1.fixture | on-demand | 2 × 4 | 4,200 | 283 | 2 | 525 | 100 | 1.00 | "
        "0.0661 | 14.88 | 66.1 |" in md
    )
    # The formula as printed keeps the W -> kW step.
    assert "1000 W / 1000 x 0.1 $/kWh) x (1 + 0) / 2 CPUs = 0.550000 $/CPU-hour" in md
    assert "catalog artefact, not a market price" in md
    stated = re.findall(r"^(\S+\.png): (\d+) × (\d+) px", md, re.M)
    assert {s[0] for s in stated} == {"cost.png", "usd-per-m.png", "speedup.png"}
    html = (out / "report.html").read_text()
    embedded = re.findall(r'<img src="data:image/png;base64,([^"]+)"', html)
    assert len(embedded) == 3
    assert not re.search(r'src="(?!data:)', html)  # self-contained: nothing fetched
    for (name, w, h), b64 in zip(stated, embedded, strict=True):
        size = (int(w), int(h))
        assert _png_size((out / name).read_bytes()) == size
        assert _png_size(base64.b64decode(b64)) == size
    assert "<table>" in html and "x1.fixture" in html


# ------------------------------------------------------------------ plan mode
def test_plan_figures_assumptions_and_extrapolation(tmp_path: Path) -> None:
    rows, cat, onprem = rows_of(tmp_path)
    plan = make_plan(
        rows,
        cat,
        onprem,
        "CartPole-v1",
        1e9,
        targets=["aws", "local"],
        basis="local",
        sizes=(1, 2, 4),
    )
    by = {(p.hardware, p.nodes): p for p in plan.predictions}
    local_fit = next(s.fit for s in plan.series if s.target == "local")
    # local: 1100 steps/s at 2 CPUs, 2100 at 4: b = log2(2100 / 1100) = 0.932886
    assert local_fit.b == pytest.approx(math.log2(2100 / 1100))
    assert "2 sizes" in local_fit.quality()

    # 4 local nodes x 2 CPUs = 8 CPUs: 2100 x 2^b = 2100 x 2100/1100 = 4009.09 steps/s,
    # outside the measured 2-4 CPUs; 1e9 x 1100 / 2100² / 3600 = 69.28697 h x 8 x 0.55 $
    # = 304.8627 $
    p = by[("Fixture CPU", 4)]
    assert p.steps_per_s == pytest.approx(2100 * 2100 / 1100)
    assert p.usd_ondemand == pytest.approx(304.8627, rel=1e-6)
    assert p.extrapolated and p.source == "measured"
    assert not by[("Fixture CPU", 2)].extrapolated

    # x1.fixture was measured (2 x 4 vCPUs, 4200 steps/s): its own run replaces the
    # prediction.  At 2 instances: 1e9 / 4200 / 3600 = 66.1376 h x 2 x 0.5 = 66.1376 $
    # on-demand, x 2 x 0.2 = 26.455 $ spot.
    x = by[("x1.fixture", 2)]
    assert (x.source, x.assumptions, x.extrapolated) == ("measured", "–", False)
    assert x.usd_ondemand == pytest.approx(66.137566, rel=1e-6)
    assert x.usd_spot == pytest.approx(26.455026, rel=1e-6)
    assert by[("x1.fixture", 4)].extrapolated

    # y1.fixture never ran: its 8 vCPUs are 8 CPUs of the local fit (the unit Ray counts
    # on both), beyond the measured 2-4: 2100 x 2^b = 4009.09 steps/s x relative_speed 1.5
    # = 6013.636; 1e9 x 1100 / (2100² x 1.5 x 3600) = 1.1e12 / 2.3814e10 = 46.19132 h
    # x 0.8 $/h = 36.95305 $; no spot price in the catalog -> none, not zero.
    y = by[("y1.fixture", 1)]
    assert y.cpus == 8
    assert y.steps_per_s == pytest.approx(2100 * 2100 / 1100 * 1.5)
    assert y.usd_ondemand == pytest.approx(36.95305, rel=1e-6)
    assert y.usd_spot is None
    assert y.source == "predicted from local Fixture CPU"
    assert y.assumptions == "relative_speed 1.5"
    assert y.extrapolated and y.measured == (2, 4)


def test_plan_output_and_refusals(tmp_path: Path) -> None:
    results, catalog, config = standard(tmp_path)
    common = ["--results", results, "--catalog", catalog, "--config", config, "--plan"]
    p = run("invoke", *common, "--env", "CartPole-v1", "--basis", "local", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "fit local Fixture CPU: steps/s = " in p.stdout and "2 sizes" in p.stdout
    assert "fit aws x1.fixture: one size measured (8 CPUs): linear scaling assumed" in p.stdout
    assert "EXTRAPOLATED" in p.stdout and "measured range" in p.stdout
    assert "relative_speed 1.5 " in p.stdout
    assert "Standard_F4s_v2" in p.stdout  # every catalog cloud by default
    assert "cheapest: " in p.stdout and "fastest: " in p.stdout

    line = one_line_error(run("syndeo", *common, "--env", "Humanoid-v5", cwd=tmp_path))
    assert "no measurement of Humanoid-v5" in line and "CartPole-v1" in line
    line = one_line_error(
        run("invoke", *common, "--env", "CartPole-v1", "--target", "slurm", cwd=tmp_path)
    )
    assert "no measurement of CartPole-v1 on target slurm" in line
    line = one_line_error(
        run("invoke", *common, "--env", "CartPole-v1", "--basis", "gcp", cwd=tmp_path)
    )
    assert "--basis gcp" in line
    line = one_line_error(run("invoke", *common, cwd=tmp_path))
    assert "--plan needs --env" in line
    line = one_line_error(
        run("syndeo", *common, "--env", "CartPole-v1", "--mode", "collect", cwd=tmp_path)
    )
    assert "measured in count mode only, not collect" in line
    line = one_line_error(
        run("syndeo", *common, "--env", "CartPole-v1", "--sizes", "0,2", cwd=tmp_path)
    )
    assert "--sizes" in line


def test_fit_quality_three_sizes_and_superlinear_cap() -> None:
    # Exactly 1000 x n^0.9 at 1, 2, 4 CPUs: recovered, R² = 1, no residual.
    f = fit_power_law([(n, 1000 * n**0.9) for n in (1, 2, 4)])
    assert (f.a, f.b, f.r2) == (pytest.approx(1000), pytest.approx(0.9), pytest.approx(1.0))
    assert "R² 1.000" in f.quality()
    # Noise that looks superlinear (1000 at 1, 2200 at 2) is capped at linear:
    # a = exp(mean(log(1000/1), log(2200/2))) = sqrt(1000 x 1100) = 1048.81
    g = fit_power_law([(1, 1000.0), (2, 2200.0)])
    assert g.capped and g.b == 1.0 and g.a == pytest.approx(math.sqrt(1000 * 1100))


# ------------------------------------------------------------------ the catalog
def test_shipped_catalog_and_override(tmp_path: Path) -> None:
    cat = load_catalog()
    assert len(cat.prices) == 19  # the anchors snapshot: 7 AWS, 6 GCP, 6 Azure types
    f4 = cat.price("azure", "Standard_F4s_v2", "eastus")
    assert "artefact" in f4.source
    assert cat.hourly("aws", "c7i.xlarge", "us-east-1", spot=False) == 0.1785
    mine = tmp_path / "aws.csv"  # named after its cloud: no provider column needed
    mine.write_text("instance_type,vcpus,region,ondemand_usd_per_h\nc7i.xlarge,4,us-east-1,0.15\n")
    cat = load_catalog(mine)
    assert cat.hourly("aws", "c7i.xlarge", "us-east-1", spot=False) == 0.15
    with pytest.raises(CompareError, match=r"no spot price for c7i.xlarge in us-east-1"):
        cat.hourly("aws", "c7i.xlarge", "us-east-1", spot=True)


def test_slurm_and_ssh_summaries_priced_on_prem(tmp_path: Path) -> None:
    results = tmp_path / "results"
    # Slurm allocated 4 CPUs per node though Ray was given 2: the CPUs charged are the
    # allocated ones, the CPUs every throughput figure is per are Ray's.
    write_run(
        results,
        "slurm-a",
        "slurm",
        2,
        2,
        [(4000, 2.0)],
        360.0,
        {"slurm": {"partition": "debug", "cpus_per_node": 4}},
    )
    machines = {"provider": "ssh", "instance_type": "rack-7", "count": 1, "instance_seconds": 99}
    write_run(results, "ssh-a", "ssh", 1, 2, [(2000, 2.0)], 36.0, {"machines": machines})
    rows = build_rows(find_runs(results).runs, load_catalog(), OnPremCost(**core_hour_fixture()))
    by = {r.target: r for r in rows}
    # slurm: 2 nodes x 4 CPUs x 0.55 = 4.4 $/h; all-in 360 s -> 0.44 $ over 4000 steps =
    # 110 $/M; 2000 steps/s over 2 x 2 Ray CPUs = 500 per CPU
    assert (by["slurm"].hardware, by["slurm"].cpus) == ("partition debug", 4)
    assert by["slurm"].price.usd_per_h == pytest.approx(4.4)
    assert by["slurm"].per_cpu == pytest.approx(500)
    assert by["slurm"].allin_usd_per_m == pytest.approx(110.0)
    # ssh: on-prem too, by wall time (not instance-seconds): 2 x 0.55 x 36 / 3600 = 0.011 $
    assert by["ssh"].hardware == "rack-7"
    assert by["ssh"].allin_usd_per_m == pytest.approx(0.011 / 2000 * 1e6)


def core_hour_fixture() -> dict[str, float]:
    # (8760 / 8760 + 1000 W x 0.1) / 2 cores = 0.55 $/core-hour, as in fixtures.CONFIG_TOML
    return {
        "capex_usd_per_node": 8760,
        "amortisation_years": 1,
        "utilisation": 1.0,
        "power_w_per_node": 1000,
        "usd_per_kwh": 0.1,
        "admin_share": 0,
        "cores_per_node": 2,
    }
