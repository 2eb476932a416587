"""Running syndeo as the unprivileged CI user, the way a user runs it on a login node.

Shared by the Slurm and SSH tests: ``as_user`` wraps an argv in ``runuser`` with a
clean, explicit environment; ``UserRun`` is one run's config dir, SYNDEO_HOME and
results dir, and runs the README's command, ``invoke deploy --target T --config F``,
reading what it promises back: ``deploy.json`` in the results dir, or the one
``syndeo: error:`` line and the exit code when it refused to start.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CI_USER = "syndeo-ci"
ROOT = Path(__file__).resolve().parents[1]
# The CI user's interpreter for this checkout (scripts/setup.d/slurm.sh makes it).
CI_PYTHON = ROOT / ".venv" / "ci-user" / "bin" / "python"
# The README's front end, as the CI user runs it from any directory.
INVOKE = [str(CI_PYTHON), "-m", "invoke", "-r", str(ROOT)]


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
    def home(self) -> Path:
        """Its SYNDEO_HOME: beside ``root`` (the program's work dir), never inside it --
        the launcher refuses a work dir that holds its state (syndeo/launcher/trusted.py)."""
        return self.root.with_name(self.root.name + ".home")

    @property
    def env(self) -> dict[str, str]:
        return {"SYNDEO_HOME": str(self.home)}

    def remove(self) -> None:
        """Everything of the run: its dir and its SYNDEO_HOME."""
        for path in (self.root, self.home):
            shutil.rmtree(path, ignore_errors=True)

    @property
    def results(self) -> Path:
        return self.root / "results"

    def config(self, body: str) -> Path:
        path = self.root / "config.toml"
        path.write_text(f'results_dir = "{self.results}"\nworkdir = "{self.root}"\n' + body)
        give_to_ci_user(path)
        return path

    def argv(self, body: str, *extra: str) -> list[str]:
        """``invoke deploy`` of ``body`` (written to config.toml) as the README shows it:
        its target and an id (the body's, else a new one) on the command line."""
        cfg = self.config(body)
        target = re.search(r'^target = "([^"]+)"', body, re.M)
        named = re.search(r'^cluster_id = "([^"]+)"', body, re.M)
        # Named as the launcher names them (<target>-<hex>): tests find them by that.
        prefix = target.group(1) if target else "cluster"
        cid = named.group(1) if named else f"{prefix}-{uuid.uuid4().hex[:8]}"
        args = ["deploy", *(["--target", target.group(1)] if target else [])]
        return [*INVOKE, *args, "--config", str(cfg), "--cluster-id", cid, *extra]

    def start(self, body: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            as_user(self.argv(body), {**self.env, **(env or {})}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
        )

    @staticmethod
    def cluster_id(proc: subprocess.Popen[str]) -> str:
        """The id a :meth:`start` gave its deploy."""
        args = [str(a) for a in proc.args]  # type: ignore[union-attr]
        return args[args.index("--cluster-id") + 1]

    @staticmethod
    def finish(proc: subprocess.Popen[str], timeout: float = 420) -> dict[str, Any]:
        """What the deploy promised: its ``deploy.json`` (``result_path``/``timings`` as
        the launcher's outcome names them), or its one-line error when it wrote none."""
        out, err = proc.communicate(timeout=timeout)
        args = [str(a) for a in proc.args]  # type: ignore[union-attr]
        cfg = Path(args[args.index("--config") + 1])
        cid = args[args.index("--cluster-id") + 1]
        summary = cfg.parent / "results" / cid / "deploy.json"
        outcome: dict[str, Any]
        if summary.exists():
            outcome = json.loads(summary.read_text())
            outcome["result_path"] = outcome.get("result")
            outcome["timings"] = outcome.get("timings_s", {})
            assert (proc.returncode == 0) == (outcome["exit_code"] == 0), (proc.returncode, err)
        else:
            errors = [ln for ln in err.splitlines() if ln.startswith("syndeo: error: ")]
            assert proc.returncode != 0 and errors, (
                f"deploy wrote no deploy.json and no error (rc {proc.returncode}): {err[-3000:]}"
            )
            outcome = {
                "cluster_id": cid,
                "exit_code": proc.returncode,
                "error": errors[-1].removeprefix("syndeo: error: "),
            }
        outcome["_stderr"] = err
        outcome["_stdout"] = out
        outcome["_rc"] = proc.returncode
        return outcome

    def deploy(self, body: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        return self.finish(self.start(body, env))


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
            capture_output=True,
            text=True,
            cwd="/",
            check=False,
        )
    finally:
        image.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout
