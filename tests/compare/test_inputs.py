"""`compare` refuses every input that would print a wrong figure, in one line, and shows
text from files as text (terminal, report.md, report.html).

Each case is the standard fixture (see fixtures.standard) with one thing gone wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from syndeo.compare.catalog import load_catalog
from syndeo.compare.errors import CompareError
from syndeo.compare.plan import make_plan
from syndeo.compare.report import build_rows, render_compare
from syndeo.compare.runs import find_runs
from syndeo.compare.settings import OnPremCost
from tests.compare.fixtures import (
    bench_result,
    edit_json,
    fixture_onprem,
    one_line_error,
    run,
    standard,
    write_run,
)

Change = Callable[[Any], None]


def repeats(*which: int, **values: object) -> Change:
    """Set ``values`` on the given repeats (all when none given) of the first env."""

    def change(doc: Any) -> None:
        reps = doc["results"][0]["syndeo"]["repeats"]
        for i in which or range(len(reps)):
            reps[i].update(values)

    return change


def key(path: str, value: object) -> Change:
    """Set a dotted key of a JSON document (numbers index lists)."""

    def change(doc: Any) -> None:
        *parents, last = path.split(".")
        for p in parents:
            doc = doc[int(p)] if isinstance(doc, list) else doc[p]
        doc[last] = value

    return change


# (file under results/, change, the one line's expected text)
BAD: dict[str, tuple[str, Change, str]] = {
    # A repeat is averaged in and divided by: each must be a positive, finite measurement.
    "negative rate": (
        "local-b/result.json",
        repeats(1, steps_per_s=-2200.0),
        r"local-b/result.json: CartPole-v1 \(count, 4 workers\): repeat 2 has "
        r"steps_per_s -2200.0 \(must be positive and finite\)",
    ),
    "nan rate": (
        "local-b/result.json",
        repeats(0, steps_per_s=math.nan),
        r"repeat 1 has steps_per_s nan",
    ),
    "infinite rate": (
        "local-b/result.json",
        repeats(0, steps_per_s=math.inf),
        r"repeat 1 has steps_per_s inf",
    ),
    "all rates zero": (
        "local-b/result.json",
        repeats(steps_per_s=0.0),
        r"repeat 1 has steps_per_s 0.0",
    ),
    "all rates negative": (
        "local-b/result.json",
        repeats(steps_per_s=-1.0),
        r"repeat 1 has steps_per_s -1.0",
    ),
    "negative samples": (
        "local-b/result.json",
        repeats(0, samples=-4000),
        r"repeat 1 has samples -4000",
    ),
    "all seconds zero": ("local-b/result.json", repeats(seconds=0.0), r"repeat 1 has seconds 0.0"),
    "no repeats": (
        "local-b/result.json",
        key("results.0.syndeo.repeats", []),
        r"local-b/result.json: CartPole-v1 \(count, 4 workers\): no repeats measured",
    ),
    # All-in cost: a zero is a silent zero, a negative a refund.
    "zero instance-seconds": (
        "aws-c/deploy.json",
        key("machines.instance_seconds", 0),
        r"aws-c/deploy.json is not a valid deploy summary: "
        r"machines.instance_seconds: Input should be greater than 0",
    ),
    "infinite instance-seconds": (
        "aws-c/deploy.json",
        key("machines.instance_seconds", math.inf),
        r"machines.instance_seconds: Input should be a finite number",
    ),
    "negative teardown": (
        "local-a/deploy.json",
        key("timings_s.teardown_done_s", -36.0),
        r"local-a/deploy.json is not a valid deploy summary: "
        r"timings_s.teardown_done_s: Input should be greater than 0",
    ),
    "zero teardown": (
        "local-a/deploy.json",
        key("timings_s.teardown_done_s", 0),
        r"timings_s.teardown_done_s: Input should be greater than 0",
    ),
    # Priced as one thing, shown as another.
    "nodes not instances": (
        "aws-c/deploy.json",
        key("nodes", 4),
        r"aws-c/deploy.json: 4 nodes but machines.count 2",
    ),
    "another cloud's provider": (
        "aws-c/deploy.json",
        key("machines.provider", "gcp"),
        r"aws-c/deploy.json: target aws but machines.provider gcp",
    ),
    "result of another cluster": (
        "local-b/deploy.json",
        key("nodes", 3),
        r"local-b/deploy.json: 3 nodes but its result .*local-b/"
        r"result.json measured a cluster of 2",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_measurement_or_summary_is_one_line(tmp_path: Path, case: str) -> None:
    results, _, _ = standard(tmp_path)
    name, change, expected = BAD[case]
    edit_json(results / name, change)
    with pytest.raises(CompareError) as err:
        find_runs(results)
    assert re.search(expected, str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("front", ["invoke", "syndeo"])
def test_nan_rate_through_the_front_ends(tmp_path: Path, front: str) -> None:
    results, catalog, _ = standard(tmp_path)
    edit_json(results / "aws-c" / "result.json", repeats(0, steps_per_s=math.nan))
    out = tmp_path / "report"
    line = one_line_error(
        run(front, "--results", results, "--catalog", catalog, "--out", out, cwd=tmp_path)
    )
    assert "aws-c/result.json: CartPole-v1 (count, 8 workers): repeat 1 has steps_per_s nan" in line
    assert not out.exists()  # refused before anything is written


def test_result_without_measurements_is_noted_or_one_line(tmp_path: Path) -> None:
    results, _, _ = standard(tmp_path)
    edit_json(results / "local-b" / "result.json", key("results", []))
    found = find_runs(results)
    assert {r.cluster_id for r in found.runs} == {"local-a", "aws-c"}
    [note] = found.skipped
    assert note.startswith("local-b: its result has no measurements (")
    # Nothing else to compare: the one line says why.
    alone = tmp_path / "alone"
    write_run(alone, "local-x", "local", 1, 2, [(2000, 2.0)], 10.0)
    edit_json(alone / "local-x" / "result.json", key("results", []))
    with pytest.raises(
        CompareError,
        match=r"no benchmark results to compare in .*local-x: its "
        r"result has no measurements",
    ):
        find_runs(alone)


def test_standalone_result_that_ends_before_it_starts(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    res = bench_result("standalone", 1, 2, [(2000, 2.0)])
    res.manifest.finished_at = "2026-11-22T19:59:00+00:00"  # started 20:00:00
    (results / "bench-x.json").write_text(res.model_dump_json())
    with pytest.raises(
        CompareError,
        match=r"bench-x.json: finished_at 2026-11-22T19:59:00\+00:00 "
        r"is not after started_at",
    ):
        find_runs(results)


# ------------------------------------------------------------------ the catalog
HEADER = "provider,instance_type,vcpus,region,ondemand_usd_per_h,spot_usd_per_h\n"


def test_catalog_provider_in_capitals_is_found(tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text(HEADER + "AWS , x1.fixture ,4,us-east-1,0.5,0.2\n")
    cat = load_catalog(mine)
    assert cat.hourly("aws", "x1.fixture", "us-east-1", spot=False) == 0.5
    assert "x1.fixture" in {p.instance_type for p in cat.of("aws")}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("ibm,x1,4,us-east-1,0.5,0.2", "line 2: provider: Value error, 'ibm' is not one of aws"),
        (
            "aws,x1,4,us-east-1,0.5,0.9",
            "line 2: row: Value error, spot_usd_per_h 0.9 is above "
            "ondemand_usd_per_h 0.5 (columns swapped?)",
        ),
        ("aws,x1,4,us-east-1,inf,", "line 2: ondemand_usd_per_h: Input should be a finite number"),
        ("aws,x1,4,us-east-1,0.5,nan", "line 2: spot_usd_per_h: Input should be a finite number"),
    ],
)
def test_catalog_row_that_would_misprice_is_refused(
    tmp_path: Path, row: str, expected: str
) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text(HEADER + row + "\n")
    with pytest.raises(CompareError) as err:
        load_catalog(mine)
    assert f"price catalog {mine} {expected}" in str(err.value)


def test_infinite_price_through_the_front_end(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    catalog.write_text(catalog.read_text().replace(",0.5,0.2,", ",inf,0.2,"))
    line = one_line_error(run("syndeo", "--results", results, "--catalog", catalog, cwd=tmp_path))
    assert "line 2: ondemand_usd_per_h: Input should be a finite number" in line


def test_onprem_settings_that_would_print_no_price(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"gives 0 \$/CPU-hour"):
        OnPremCost(capex_usd_per_node=0, power_w_per_node=0)
    _, _, config = standard(tmp_path)
    config.write_text("[cost.onprem]\ncapex_usd_per_node = inf\n")
    results = tmp_path / "results"
    line = one_line_error(run("syndeo", "--results", results, "--config", config, cwd=tmp_path))
    assert "cost.onprem.capex_usd_per_node" in line and "finite" in line


@pytest.mark.parametrize("steps", ["nan", "inf", "1e400", "-5", "many"])
def test_plan_steps_must_be_a_positive_finite_number(tmp_path: Path, steps: str) -> None:
    if steps in ("-5", "many"):  # plain refusals; keep the subprocesses for the tracebacks
        from syndeo.cli.compare import _steps

        with pytest.raises(CompareError, match=r"--steps: give a positive number like 1e9"):
            _steps(steps)
        return
    results, catalog, _ = standard(tmp_path)
    line = one_line_error(
        run(
            "syndeo",
            "--results",
            results,
            "--catalog",
            catalog,
            "--plan",
            "--env",
            "CartPole-v1",
            "--steps",
            steps,
            cwd=tmp_path,
        )
    )
    assert f"--steps: give a positive number like 1e9, not '{steps}'" in line


@pytest.mark.parametrize("sizes", ["0,2", "1,1" + "0" * 400, "1,,2", "two"])
def test_plan_sizes_are_node_counts(sizes: str) -> None:
    from syndeo.cli.compare import _sizes

    # A 400-digit count would overflow the model's float arithmetic: a traceback.
    with pytest.raises(CompareError, match=r"--sizes: give node counts from 1 to 100,000"):
        _sizes(sizes)


# ------------------------------------------------------------------ file text stays text
MARKUP_ENV = "Cart[/]Pole [link=http://evil.example]click[/link] $\\bad$"
MD_CPU = "Fixture | CPU [a](http://x.example) ![i](http://y.example/i.png) <b>bold</b> *em*"


def test_markup_in_a_name_is_printed_as_text(tmp_path: Path) -> None:
    results = tmp_path / "results"
    cpu = "CPU [bold]x[/bold] [/]"
    write_run(results, "local-m", "local", 1, 2, {MARKUP_ENV: [(2000, 2.0)]}, 36.0, cpu_model=cpu)
    out = tmp_path / "report"
    p = run("syndeo", "--results", results, "--out", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # rich would have failed on [/] (after writing the report), hidden the link, and
    # matplotlib on the $...$ formula.
    assert f"{MARKUP_ENV} — count, paper protocol" in p.stdout
    assert f"cheapest for this workload: 1 x local {cpu} (on-prem)" in p.stdout
    assert (out / "report.html").is_file() and (out / "cost.png").is_file()
    p = run(
        "syndeo",
        "--results",
        results,
        "--plan",
        "--env",
        MARKUP_ENV,
        "--target",
        "local",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert f"basis for unmeasured instance types: local {cpu}\n" in p.stdout
    assert f"Plan: 1,000,000,000 steps of {MARKUP_ENV} (count" in p.stdout
    assert f"cheapest: 1 x local {cpu} " in p.stdout


def _md_cells(line: str) -> list[str]:
    """Cells of a Markdown table row: split at | not escaped by a backslash."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_table_cells_and_links_from_files_are_escaped(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    for cluster in ("local-a", "local-b"):
        edit_json(results / cluster / "result.json", key("manifest.cpu_model", MD_CPU))
    found = find_runs(results)
    md, html, _ = render_compare(found, load_catalog(catalog), fixture_onprem(), tmp_path / "r")
    text = md.read_text()
    # The 1 x 2 local row: still 13 cells, cluster $/h (2 x 0.55) in its own column.
    [row] = [ln for ln in text.splitlines() if ln.startswith("| local |") and "| 1 × 2 |" in ln]
    cells = _md_cells(row)
    assert len(cells) == 13
    assert cells[1] == (
        r"Fixture \| CPU \[a\](http://x.example) \!\[i\](http://y.example/i.png) "
        r"\<b\>bold\</b\> \*em\*"
    )
    assert cells[9] == "1.10"
    page = html.read_text()
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", page, re.S)]
    [html_row] = [r for r in rows if r and r[0] == "local" and r[3] == "1 × 2"]
    assert len(html_row) == 13 and html_row[9] == "1.10"
    assert html_row[1] == (
        "Fixture | CPU [a](http://x.example) ![i](http://y.example/i.png) "
        "&lt;b&gt;bold&lt;/b&gt; *em*"
    )
    assert "<a " not in page and "<b>" not in page and "<em>" not in page
    assert not re.search(r'src="(?!data:)', page)


def test_partial_results_are_flagged(tmp_path: Path) -> None:
    results, catalog, _ = standard(tmp_path)
    edit_json(results / "local-b" / "result.json", key("partial", True))
    found = find_runs(results)
    rows = build_rows(found.runs, load_catalog(catalog), fixture_onprem())
    assert [r.target + str(r.nodes) for r in rows if r.partial] == ["local2"]
    md, _, _ = render_compare(found, load_catalog(catalog), fixture_onprem(), tmp_path / "r")
    text = md.read_text()
    assert "| h to 1 B | flags |" in text
    assert re.search(
        r"^\| local \| Fixture CPU \| on-prem \| 2 × 2 \| .* \| PARTIAL \|$", text, re.M
    )
    assert "| local-b PARTIAL | local |" in text
    plan = make_plan(rows, load_catalog(catalog), fixture_onprem(), "CartPole-v1", 1e9)
    [fit] = [s.describe() for s in plan.series if s.partial]
    assert fit.startswith("fit local Fixture CPU (PARTIAL runs): steps/s = ")


def test_alibaba_prices_come_from_the_users_catalog(tmp_path: Path) -> None:
    """No Alibaba Cloud price list with a source and a date could be obtained here, so
    alibaba.csv ships without rows (never a guessed number): a price not given is one
    line naming the type and region, and a user catalog supplies it."""
    with pytest.raises(CompareError, match=r"ecs\.g7\.2xlarge.*cn-hangzhou"):
        load_catalog().price("alibaba", "ecs.g7.2xlarge", "cn-hangzhou")
    mine = tmp_path / "alibaba.csv"
    mine.write_text(HEADER + "alibaba,ecs.g7.2xlarge,8,cn-hangzhou,0.4,0.1\n")
    cat = load_catalog(mine)
    assert cat.hourly("alibaba", "ecs.g7.2xlarge", "cn-hangzhou", spot=True) == 0.1
