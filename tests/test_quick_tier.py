"""``./scripts/test --quick`` as the docs show it (README, docs/contributing.md): the venv
without ``--all``, lint and types, then pytest with ``--quick`` and the extra arguments.

Run with ``--collect-only`` on one module, so that it checks the command itself (what it
installs, that it leaves out what is marked as needing more, that arguments reach pytest)
without running the quick tier inside the suite: about 12 s with a warm mypy cache.
"""

from __future__ import annotations

import re
import subprocess

from tests.support.helpers import ROOT


def test_scripts_test_quick_runs_the_quick_tier_only() -> None:
    proc = subprocess.run(
        ["bash", "scripts/test", "--quick", "--collect-only", "-q", "tests/bench/test_partial.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "syndeo setup: done" in out
    assert "scripts/setup.d/" not in out  # no `setup --all`: nothing that needs root
    # test_partial.py: two tests run a benchmark through Ray (marked cluster), one does not.
    assert re.search(r"\b1/3 tests collected \(2 deselected\)", out), out[-2000:]
    assert "test_report_names_the_files_it_cannot_read" in out
    assert "quick tier: 2 test(s) that need a Ray cluster" in out
