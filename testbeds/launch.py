"""Run `python -m syndeo deploy` as the unprivileged container user (tests, benchmark)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testbeds.users import CI_PYTHON, ROOT


def launcher_python(run_user: str | None) -> str:
    """An interpreter the run user can execute, running THIS checkout's syndeo.

    The project venv's interpreter may sit under /root; scripts/setup.d/slurm.sh
    makes ``.venv/ci-user`` per checkout for syndeo-ci (a machine-wide one would
    run whichever checkout set it up last).
    """
    if run_user is None:
        return sys.executable
    python = os.environ.get("SYNDEO_CI_PYTHON", str(CI_PYTHON))
    code = "import syndeo, ray; print(syndeo.__file__)"
    probe = subprocess.run(
        ["runuser", "-u", run_user, "--", python, "-c", code], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise RuntimeError(f"{run_user} cannot run {python} with syndeo: {probe.stderr!r}")
    where = Path(probe.stdout.strip()).resolve()
    if not where.is_relative_to(ROOT):
        raise RuntimeError(f"{python} runs syndeo from {where}, not from this checkout {ROOT}")
    return python


def deploy_as(
    run_user: str | None, args: list[str], cwd: Path, home: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    argv = [launcher_python(run_user), "-m", "syndeo", "deploy", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNDEO_")}
    env.update(SYNDEO_HOME=str(home), SYNDEO_TEST_HOST_ONLY="must-not-leak")
    if run_user is not None:
        env["HOME"] = os.path.expanduser(f"~{run_user}")
        argv = ["runuser", "-u", run_user, "--", *argv]
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
