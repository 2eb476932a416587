"""Every Python the launcher or its watcher starts runs isolated: a ``syndeo`` package
planted in the directory it was started from (a work dir a task can write) is never
imported, while what the launcher found through ``PYTHONPATH`` still is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher.pyspawn import isolated_argv, launcher_python

PLANT = "open({marker!r}, 'w').write('ran')\n"


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    work, marker = tmp_path / "work", tmp_path / "planted-ran"
    (work / "syndeo").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (work / "syndeo" / name).write_text(PLANT.format(marker=str(marker)))
    (work / "sitecustomize.py").write_text(PLANT.format(marker=str(marker)))
    return work, marker


def test_a_package_planted_in_the_working_directory_is_not_imported(tmp_path: Path) -> None:
    work, marker = _planted(tmp_path)
    run = subprocess.run(
        isolated_argv("syndeo", "--help"), cwd=work, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "usage: syndeo" in run.stdout and not marker.exists()
    # What the same command ran without -I (the threat is real on this machine).
    subprocess.run([sys.executable, "-m", "syndeo", "--help"], cwd=work, capture_output=True)
    assert marker.exists()


def test_pythonpath_reaches_the_child_but_never_the_working_directory(tmp_path: Path) -> None:
    work, marker = _planted(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "extra_mod.py").write_text("import sys\nprint('extra', sys.argv[1:])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([".", "", str(extra)])}
    argv = isolated_argv("extra_mod", "a", "b", env=env)
    assert argv[-4:] == ["-m", "extra_mod", "a", "b"]  # the module stays the last words
    run = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "extra ['a', 'b']"
    # `syndeo` itself from the launcher's own install, not from "." on PYTHONPATH.
    run = subprocess.run(
        isolated_argv("syndeo", "--help", env=env), cwd=work, env=env, capture_output=True
    )
    assert run.returncode == 0 and not marker.exists()


def test_the_working_directory_must_be_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(ConfigError, match="not a private directory"):
        launcher_python("syndeo", "down", cwd=shared)
    shared.chmod(0o700)
    argv, cwd = launcher_python("syndeo", "down", cwd=shared)
    assert cwd == shared and argv[1] == "-I"
