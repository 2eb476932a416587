"""The documentation site builds strictly, and what it shows is generated where it says so.

``mkdocs build --strict`` fails on a broken link, a link to a repository file that does not
exist (scripts/docs_hooks.py), an anchor that is not there and a page left out of the
navigation; the Terraform modules' tables must be what scripts/tf_docs.py makes of the
modules now.  Quick tier: no cluster, a few seconds.
"""

from __future__ import annotations

import html
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import syndeo.api
from syndeo.core.errors import SyndeoError
from tests.support.helpers import ROOT

MKDOCS_ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


INVOKE = [sys.executable, "-m", "invoke", "-r", str(ROOT)]


def test_site_builds_strictly(tmp_path: Path) -> None:
    """``invoke docs --out DIR``: ``mkdocs build --strict``, as CI builds the site."""
    site = tmp_path / "site"
    proc = subprocess.run(
        [*INVOKE, "docs", "--out", str(site)],
        cwd=tmp_path,
        env=MKDOCS_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("WARNING")]
    assert warnings == []
    # Every page of the navigation is in the site, and a test linked from a page is too.
    nav = re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    nav += re.findall(r"^\s*-\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(nav) > 20
    for page in nav:
        built = site / page.removesuffix(".md") / "index.html"
        if page.endswith(("index.md", "README.md")):
            built = site / Path(page).parent / "index.html"
        assert built.is_file(), f"{page}: not built ({built})"
    assert (site / "src/tests/launcher/test_recovery.py").is_file()
    home = html.unescape(re.sub(r"<[^>]+>", "", (site / "index.html").read_text()))
    assert "./scripts/setup && .venv/bin/invoke deploy --target local" in home
    # The Python API's reference is made from the docstrings (mkdocstrings), not by hand.
    api = html.unescape(re.sub(r"<[^>]+>", "", (site / "reference/api/index.html").read_text()))
    for documented in (syndeo.api.Cluster.attach, syndeo.api.JobState.done, SyndeoError):
        first_line = (documented.__doc__ or "").splitlines()[0].replace("``", "")
        assert first_line and first_line in api, f"{documented!r}: not in reference/api.md"


def test_invoke_docs_serves_the_site_on_loopback() -> None:
    """``invoke docs`` as the docs show it: the site on 127.0.0.1, until stopped."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [*INVOKE, "docs", "--port", str(port)],
        cwd=ROOT,
        env=MKDOCS_ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        page = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                    page = reply.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "<title>Syndeo</title>" in page, proc.stderr.read() if proc.poll() else "no page"
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)


def test_a_link_to_a_missing_file_fails_the_build(tmp_path: Path) -> None:
    """The hook's check is real: a page linking to a test that does not exist fails."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nSee [the test](../tests/test_no_such_file.py).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"site_name: x\ndocs_dir: {docs}\nhooks:\n  - {ROOT / 'scripts/docs_hooks.py'}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=tmp_path,
        env=MKDOCS_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "index.md: link to ../tests/test_no_such_file.py, which does not exist" in proc.stderr


def test_terraform_tables_are_generated_from_the_modules() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/tf_docs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    """The first block is exactly the two commands a fresh clone needs (run the main job on
    the local target; the suite CI runs), and what follows it says how to install the wheel
    and what is verified where, before the second section starts."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    before, block, after = readme.split("```", 2)[0], *readme.split("```", 2)[1:]
    assert "Ray" in before and before.count("\n## ") == 0
    commands = [ln for ln in block.removeprefix("bash\n").splitlines() if ln.strip()]
    assert len(commands) == 2, commands
    assert commands[0].startswith("./scripts/setup && .venv/bin/invoke deploy --target local")
    assert commands[1].startswith("./scripts/test ") and "--quick" not in block
    first_screen = after.split("\n## ", 1)[0]
    assert "pip install syndeo-" in first_screen and "-py3-none-any.whl" in first_screen
    assert "emulated AWS" in first_screen and "real cloud account" in first_screen
    assert "./scripts/test --quick" in first_screen
