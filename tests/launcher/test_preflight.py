"""Bad workload settings are refused on the launcher, before any node starts."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import psutil
import pytest

from tests.support.helpers import ROOT

INVOKE = Path(sys.executable).with_name("invoke")


def _run_watching(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``argv`` to the end; also every ``syndeo node`` process it spawned meanwhile."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    nodes: set[str] = set()
    launcher = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            for child in launcher.children(recursive=True):
                cmd = " ".join(child.cmdline())
                if "syndeo" in cmd and cmd.endswith(" node"):
                    nodes.add(f"{child.pid} {cmd}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), nodes


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "NoSuchEnv-v9"], "unknown environment 'NoSuchEnv-v9'"),
        (["--env", "CartPole-v1,Nope"], "unknown environment 'Nope'"),
        (["--run", "no-such-program --x"], "workload command not found: 'no-such-program'"),
        (
            ["--run", "./not-executable.sh"],
            "workload command './not-executable.sh' is not executable",
        ),
    ],
)
def test_invoke_deploy_refuses_bad_workload_settings_before_any_node(
    syndeo_home: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "not-executable.sh").write_text("#!/bin/sh\n")
    proc, nodes = _run_watching(
        [str(INVOKE), "-r", str(ROOT), "deploy", "--target", "local", "--nodes", "2", *args],
        cwd=tmp_path,
    )
    assert message in _one_line(proc)
    assert not nodes, f"nodes were started: {nodes}"
    assert not (syndeo_home / "clusters").exists()  # no cluster was even named on disk
    assert not (syndeo_home / "rendezvous").exists() or not any(
        (syndeo_home / "rendezvous").iterdir()
    )


def _python_without(tmp_path: Path, missing: str) -> tuple[Path, dict[str, str]]:
    """A real interpreter with this checkout's packages except ``missing`` (a node whose
    Python lacks an optional dependency)."""
    site = tmp_path / "site"
    site.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(missing) and entry.suffix != ".pth":
            (site / entry.name).symlink_to(entry)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT}{os.pathsep}{site}"}
    return venv / "bin" / "python", env


def test_a_node_python_without_gymnasium_names_the_extra(tmp_path: Path) -> None:
    python, env = _python_without(tmp_path, "gymnasium")
    proc = subprocess.run(
        [str(python), "-m", "syndeo.bench", "run", "--env", "CartPole", "--out",
         str(tmp_path / "r.json")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = _one_line(proc)
    assert "needs 'gymnasium'" in line and "pip install 'syndeo[bench]'" in line, line
    assert proc.returncode == 2
