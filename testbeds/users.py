"""Running syndeo as the unprivileged CI user, the way a user runs it on a login node.

Shared by the Slurm and SSH tests: ``as_user`` wraps an argv in ``runuser`` with a
clean, explicit environment; ``UserRun`` is one run's config dir, SYNDEO_HOME and
results dir, and runs ``deploy_as_user.py`` (which prints the outcome as JSON).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CI_USER = "syndeo-ci"
ROOT = Path(__file__).resolve().parents[1]
# The CI user's interpreter for this checkout (scripts/setup.d/slurm.sh makes it).
CI_PYTHON = ROOT / ".venv" / "ci-user" / "bin" / "python"
DEPLOY = ROOT / "tests" / "slurm" / "deploy_as_user.py"


def as_user(argv: list[str], env: dict[str, str] | None = None, **kw: Any) -> list[str]:
    """argv that runs ``argv`` as the CI user with a clean, explicit environment."""
    pw = pwd.getpwnam(CI_USER)
    base = {"HOME": pw.pw_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    pairs = [f"{k}={v}" for k, v in {**base, **(env or {})}.items()]
    return ["runuser", "-u", CI_USER, "--", "env", "-i", *pairs, *argv]


@dataclass
class UserRun:
    """A deploy run by the CI user: its config dir, SYNDEO_HOME and results dir."""

    root: Path

    @property
    def env(self) -> dict[str, str]:
        return {"SYNDEO_HOME": str(self.root / "home")}

    @property
    def results(self) -> Path:
        return self.root / "results"

    def config(self, body: str) -> Path:
        path = self.root / "config.toml"
        path.write_text(f'results_dir = "{self.results}"\nworkdir = "{self.root}"\n' + body)
        give_to_ci_user(path)
        return path

    def start(self, body: str) -> subprocess.Popen[str]:
        cfg = self.config(body)
        return subprocess.Popen(
            as_user([str(CI_PYTHON), str(DEPLOY), str(cfg)], self.env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.root,
        )  # fmt: skip

    @staticmethod
    def finish(proc: subprocess.Popen[str], timeout: float = 420) -> dict[str, Any]:
        out, err = proc.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        assert lines, f"deploy printed no outcome (rc {proc.returncode}): {err[-3000:]}"
        outcome: dict[str, Any] = json.loads(lines[-1])
        outcome["_stderr"] = err
        outcome["_stdout"] = out
        outcome["_rc"] = proc.returncode
        return outcome

    def deploy(self, body: str) -> dict[str, Any]:
        return self.finish(self.start(body))


def give_to_ci_user(path: Path) -> None:
    pw = pwd.getpwnam(CI_USER)
    os.chown(path, pw.pw_uid, pw.pw_gid)


def python_with_fake_sif(code: str, name: str) -> str:
    """Run ``python -c code ROOT SIF`` as the CI user and return its output.

    For rendering tests: rendering reads only a SIF's header (launch line and magic),
    and syndeo refuses to launch containers as root.  ``SIF`` is such a header-only
    file in the CI user's home, removed afterwards.
    """
    image = Path(f"/home/{CI_USER}/{name}")
    image.write_bytes(
        b"#!/usr/bin/env run-singularity\n".ljust(32, b" ") + b"SIF_MAGIC" + bytes(64)
    )
    os.chmod(image, 0o644)
    try:
        proc = subprocess.run(
            as_user([str(CI_PYTHON), "-c", code, str(ROOT), str(image)]),
            capture_output=True, text=True, cwd="/", check=False,
        )  # fmt: skip
    finally:
        image.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout
