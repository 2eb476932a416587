"""Text in result files is text: in the Markdown report and in the launcher's table.

Results are files the cluster's nodes wrote (to a bucket, or a shared directory), so
what they say is shown literally -- never as a link, an image, HTML, an extra table
cell or rich markup.  No Ray here: the results are written by hand.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from markdown_it import MarkdownIt
from rich.console import Console

from syndeo.bench import render_report
from syndeo.bench.models import BenchConfig, BenchResult, EnvResult, Manifest, Repeat, Series
from syndeo.bench.report import result_table

HOSTILE = {
    "target": "[click me](https://evil.example/t)",
    "cpu_model": "![pixel](https://evil.example/p.png) <img src=x onerror=alert(1)> a | b",
    "env_id": "<a href='https://evil.example/e'>Cart</a>[/tmp/x]",
    "ray": "[bold red]2.60[/] https://evil.example/r",
    "commit": "<b>**x**",  # the report shows 10 characters of it
}


def _result(workers: int) -> BenchResult:
    reps = [Repeat(samples=1000 * workers, seconds=1.0, steps_per_s=1000.0 * workers)]
    return BenchResult(
        manifest=Manifest(
            target=HOSTILE["target"],
            cluster_nodes=1,
            cluster_cpus=workers,
            cpu_model=HOSTILE["cpu_model"],
            hostname="h",
            versions={"ray": HOSTILE["ray"]},
            image_digest=None,
            git_commit=HOSTILE["commit"],
            started_at="2026-11-22T20:00:00+00:00",
        ),
        config=BenchConfig(envs=["CartPole-v1"]),
        results=[
            EnvResult(
                env_id=HOSTILE["env_id"],
                env_name="CartPole",
                mode="count",
                workers=workers,
                envs_per_actor=1,
                samples_requested=1000 * workers,
                samples_counted=1000 * workers,
                syndeo=Series(method="syndeo", repeats=reps, mean=1000.0 * workers, std=0.0),
            )
        ],
    )


def test_report_shows_result_text_literally(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for workers in (1, 2):
        (results / f"c{workers}").mkdir(parents=True)
        (results / f"c{workers}" / "result.json").write_text(_result(workers).model_dump_json())
    page = render_report(results, tmp_path / "report").read_text()
    # Rendered as a Markdown viewer (or a HTML page built from it) would render it.
    doc = MarkdownIt("commonmark").enable("table").render(page)
    assert "<a " not in doc and "<b>" not in doc and "<strong>" not in doc
    imgs = [part.split('"')[0] for part in doc.split('<img src="')[1:]]
    assert imgs and all(src.endswith(".png") and "/" not in src for src in imgs), imgs
    text = html.unescape(doc)
    for value in HOSTILE.values():
        assert value in text, value
    # The runs table keeps its 12 columns: a '|' in a value is not a cell boundary.
    runs = doc.split("<h2>Runs</h2>")[1].split("</table>")[0]
    for row in runs.split("<tr>")[2:]:
        assert row.count("<td>") == 12, row


def test_launcher_table_shows_result_text_literally() -> None:
    doc = _result(2).model_dump(mode="json")
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None, highlight=False)
    console.print(result_table(doc))  # "[/tmp/x]" raised MarkupError as markup
    text = out.getvalue()
    assert HOSTILE["env_id"] in text
    assert HOSTILE["target"] in text
