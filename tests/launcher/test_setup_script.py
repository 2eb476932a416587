"""``scripts/setup`` fails when pip fails, and says so with pip's own error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_failed_pip_install_fails_setup_with_pips_error(tmp_path: Path) -> None:
    # A checkout whose own package cannot be installed: it needs a distribution no
    # index has.  --no-index keeps pip off the network; the real pip decides.
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup", repo / "scripts" / "setup")
    (repo / "broken").mkdir()
    (repo / "broken" / "__init__.py").write_text("")
    # The real project's build backend (scripts/setup installs it; no isolation here, so
    # an editable install of the plain kind, which needs nothing more).
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "syndeo-broken"\nversion = "0"\n'
        'dependencies = ["syndeo-no-such-distribution==9.9"]\n'
        "[project.optional-dependencies]\nbench = []\ncloud = []\ndev = []\n"
        '[tool.hatch.build.targets.wheel]\npackages = ["broken"]\ndev-mode-dirs = ["."]\n'
    )
    # The venv exists already, and what the closing import check needs is importable
    # (this repo's packages): only the pip exit status can fail setup.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([sysconfig.get_paths()["purelib"], str(ROOT)]),
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # sic: pip reads 0 as "no isolation"
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    proc = subprocess.run(
        ["bash", "scripts/setup"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "syndeo-no-such-distribution" in out and "ERROR:" in out, out  # pip's own words
    assert "setup: done" not in out


def test_setup_installs_the_backend_the_build_system_requires() -> None:
    # The image build makes syndeo's wheel with the venv's own build backend (no build
    # isolation): scripts/setup must install what pyproject.toml's [build-system] asks.
    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for wanted in requires:
        assert f'"{wanted}"' in (ROOT / "scripts" / "setup").read_text(), wanted
