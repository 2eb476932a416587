"""docs/getting-started.md runs as written.

The page marks what a reader types: ``<!-- test: file NAME -->`` before a fenced block that
is a file of the user's project, ``<!-- test: run -->`` before a ``bash`` block of commands.
This test takes those blocks in the page's order, writes the files into an empty project
directory and runs the commands there with bash, as a user would with the tool installed
(the repository's ``.venv/bin`` first on ``PATH``, so ``syndeo`` is the one under test),
and checks what the page says the run prints and leaves.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import ROOT, assert_nothing_left, reap

PAGE = ROOT / "docs" / "getting-started.md"

# A marker comment, then a fence (```lang), its body, and the closing fence.
_BLOCK = re.compile(
    r"^<!-- test: (?P<what>run|file (?P<name>[\w.-]+)) -->\n"
    r"```(?P<lang>\w*)\n(?P<body>.*?)^```\s*$",
    re.M | re.S,
)


def marked_blocks(text: str) -> list[tuple[str, str, str]]:
    """(kind, file name or '', body) of every marked block, in the page's order."""
    blocks = []
    for m in _BLOCK.finditer(text):
        if m.group("what") == "run":
            assert m.group("lang") == "bash", f"a runnable block must be bash: {m.group(0)[:80]}"
            blocks.append(("run", "", m.group("body")))
        else:
            blocks.append(("file", m.group("name"), m.group("body")))
    return blocks


def test_every_marker_is_on_a_block() -> None:
    """A marker the pattern does not take (a typo, a blank line before the fence) would
    leave its block untested: every marker must be one the test reads."""
    text = PAGE.read_text()
    markers = re.findall(r"^<!-- test:.*-->$", text, re.M)
    assert len(markers) == len(marked_blocks(text)) >= 6, markers


@pytest.mark.cluster
@pytest.mark.slow
def test_getting_started_runs_as_written(tmp_path: Path, syndeo_home: Path) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    bindir = ROOT / ".venv" / "bin"  # the tool under test, as a user with it installed has it
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    printed = ""
    try:
        for kind, name, body in marked_blocks(PAGE.read_text()):
            if kind == "file":
                (project / name).write_text(body)
                continue
            run = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", body],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            assert run.returncode == 0, f"{body}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
            assert "Traceback" not in run.stderr, run.stderr[-3000:]
            printed += run.stdout + run.stderr
    finally:
        for cid in [*(p.name for p in (project / "results").glob("*")), "demo"]:
            reap(cid)
    # What the page says the first run prints, twice: by deploy --run and by the job.
    assert printed.count("nodes: 2, CPUs: 2") == 2, printed[-4000:]
    assert printed.count("sum of squares: 328350") == 2, printed[-4000:]
    runs = sorted(p.parent.name for p in (project / "results").glob("*/deploy.json"))
    assert runs, "no results/<cluster-id>/deploy.json"
    for cid in [*runs, "demo"]:
        assert_nothing_left(cid)
