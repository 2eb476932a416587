"""Bad workload settings are refused on the launcher, before any node starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

INVOKE = Path(sys.executable).with_name("invoke")


# Loaded by every Python process of the run (PYTHONPATH): logs each process it starts,
# at the moment it starts it, from Python's own audit events.  Nothing is sampled, so
# a node that lives for a millisecond is seen as surely as one that stays.
SPAWN_LOG = """\
import json, os, sys
_log = os.environ["SYNDEO_TEST_SPAWN_LOG"]
_EVENTS = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.system")

def _hook(event, args):
    if event in _EVENTS:
        argv = args[0] if event == "os.system" else args[1]
        words = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
        with open(_log, "a") as fh:
            fh.write(json.dumps([os.fsdecode(w) for w in words]) + "\\n")

sys.addaudithook(_hook)
"""


def _run_watching(
    argv: list[str], cwd: Path, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run ``argv`` to the end; also the argv of every process started on the way that
    runs ``syndeo node`` (in any form: ``-m syndeo node``, the ``syndeo`` script)."""
    hook = tmp_path / "spawn-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SPAWN_LOG)
    log = tmp_path / "spawned.jsonl"
    env = {**os.environ, "SYNDEO_TEST_SPAWN_LOG": str(log)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    spawned = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    nodes = [a for a in spawned if "node" in a and any("syndeo" in w for w in a)]
    return proc, nodes


@pytest.mark.cluster
def test_spawn_log_sees_every_node_a_deploy_starts(syndeo_home: Path, tmp_path: Path) -> None:
    """The watch itself: a deploy that does start a node shows it."""
    proc, nodes = _run_watching(
        [
            sys.executable,
            "-m",
            "syndeo",
            "deploy",
            "--target",
            "local",
            "--nodes",
            "1",
            "--cluster-id",
            "tspawn",
            "--run",
            "python -c pass",
            "--join-timeout",
            "120",
        ],
        cwd=tmp_path,
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # One node, isolated (-I: nothing of the directory it starts in on its path).
    [node] = nodes
    assert node[:2] == [sys.executable, "-I"] and node[-3:] == ["-m", "syndeo", "node"], nodes


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
        tmp_path=tmp_path,
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
        [
            str(python),
            "-m",
            "syndeo.bench",
            "run",
            "--env",
            "CartPole",
            "--out",
            str(tmp_path / "r.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = _one_line(proc)
    assert "needs 'gymnasium'" in line and "pip install 'syndeo[bench]'" in line, line
    assert proc.returncode == 2
