"""Inside the container: the invoking (unprivileged) user, no host environment, a
private $HOME, binds at the same path, and `syndeo` on PATH."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from syndeo.core.errors import ImageError
from syndeo.launcher import command

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]

PROBE = """
import json, os, pathlib, shutil
from syndeo.core.nodeconfig import load_env_fd
load_env_fd()  # as `syndeo node` does first: its variables come on a pipe
scratch = pathlib.Path(os.environ["SYNDEO_SCRATCH"])
(scratch / "written-inside").write_text("x")
print(json.dumps({
    "uid": os.getuid(), "cwd": os.getcwd(),
    "home_entries": sorted(os.listdir(os.path.expanduser("~"))),
    "env": dict(os.environ), "syndeo": shutil.which("syndeo"),
}))
"""


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)


def test_isolation_and_identity(
    sif: Path,
    shared_dir: Path,
    run_user: str | None,
    run_uid: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host_marker = Path(os.path.expanduser(f"~{run_user or ''}")) / ".syndeo-host-marker"
    host_marker.write_text("on the host only")
    monkeypatch.setenv("SYNDEO_HOST_ONLY", "must-not-leak")
    monkeypatch.setenv("APPTAINERENV_SMUGGLED", "must-not-leak")
    env = {
        "SYNDEO_SCRATCH": str(shared_dir),
        "SYNDEO_RUN": "python -c 'print(1, 2)' --flag=a,b",  # commas and quotes survive
        "SYNDEO_WORKDIR": str(shared_dir),
    }
    argv, proc_env = command.container_command(
        sif, env, [shared_dir], ["python", "-c", PROBE], user=run_user
    )
    assert "--containall" in argv and "--cleanenv" in argv
    assert not any("must-not-leak" in a for a in argv)
    out = _run(argv, proc_env)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["uid"] == run_uid != 0
    assert seen["env"]["SYNDEO_RUN"] == env["SYNDEO_RUN"]
    assert seen["env"]["SYNDEO_SCRATCH"] == str(shared_dir)
    assert "SYNDEO_HOST_ONLY" not in seen["env"] and "SMUGGLED" not in seen["env"]
    # --containall: $HOME may keep its path but is a fresh tmpfs, not the host's dir.
    assert host_marker.exists()
    assert host_marker.name not in seen["home_entries"]
    assert seen["cwd"] == str(shared_dir)
    assert seen["syndeo"] == "/opt/syndeo/bin/syndeo"
    assert (shared_dir / "written-inside").read_text() == "x"


def test_syndeo_console_script_runs(sif: Path, run_user: str | None) -> None:
    argv, env = command.container_command(sif, {}, [], ["syndeo", "--help"], user=run_user)
    out = _run(argv, env)
    assert out.returncode == 0, out.stderr
    assert "node" in out.stdout


def test_node_command_shape(sif: Path, shared_dir: Path, run_user: str | None) -> None:
    argv, env = command.node_command(
        sif, {"SYNDEO_RANK": "0"}, [shared_dir, shared_dir], user=run_user
    )
    assert argv[-3:] == [str(sif), "syndeo", "node"]
    assert argv.count(f"{shared_dir}:{shared_dir}") == 1
    # On the pipe, never in the container's environment.
    assert "APPTAINERENV_SYNDEO_RANK" not in env and env["APPTAINERENV_SYNDEO_ENV_FD"] == "3"
    names = argv[argv.index("syndeo-env") + 1 :]
    assert names[: names.index("--")] == ["SYNDEO_RANK"]


# A node (reads its pipe, as `syndeo node` does) that starts a task (a child with the
# node's environment less its secrets, as Ray's processes get it), which looks for the
# secrets in every process it can see (tests/support/task_reach.py).
NODE_AND_TASK = """
import json, os, subprocess, sys
from syndeo.core.nodeconfig import load_env_fd
load_env_fd()
secrets = {k: os.environ[k] for k in ("SYNDEO_LAUNCH_KEY", "AWS_SECRET_ACCESS_KEY")}
child = {k: v for k, v in os.environ.items() if k not in secrets}
task = (
    "import json, sys; exec(open('task_reach.py').read()); ask = json.load(sys.stdin); "
    "print(json.dumps(secrets_seen(ask['names'], ask['values'])))"
)
ask = json.dumps({"names": list(secrets), "values": list(secrets.values())})
out = subprocess.run([sys.executable, "-c", task], env=child, input=ask,
                     capture_output=True, text=True, check=True)
print(json.dumps({"node_got": sorted(secrets), "seen": json.loads(out.stdout)}))
"""


def test_no_secret_in_any_process_a_task_sees(
    sif: Path, shared_dir: Path, run_user: str | None, run_uid: int
) -> None:
    """Apptainer's init shim (PID 1 of a --containall container, readable by every task of
    the same user) keeps the container's environment as JSON in its /proc/1/environ: a
    node's secrets reach it on a pipe instead, and no process a task can see holds them,
    in either form (NAME=value, "NAME":"value") or by value."""
    reach = shared_dir / "task_reach.py"
    reach.write_text((Path(__file__).parents[1] / "support" / "task_reach.py").read_text())
    os.chown(reach, run_uid, -1)
    env = {
        "SYNDEO_LAUNCH_KEY": secrets.token_hex(32),
        "AWS_SECRET_ACCESS_KEY": "sekrit-" + secrets.token_hex(8),
        "SYNDEO_WORKDIR": str(shared_dir),
    }
    argv, proc_env = command.container_command(
        sif, env, [shared_dir], ["python", "-c", NODE_AND_TASK], user=run_user
    )
    out = _run(argv, proc_env)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["node_got"] == ["AWS_SECRET_ACCESS_KEY", "SYNDEO_LAUNCH_KEY"]
    assert seen["seen"] == [], seen


def test_root_is_refused(sif: Path) -> None:
    if os.geteuid() == 0:
        with pytest.raises(ImageError, match="refusing to run the container as root"):
            command.node_command(sif, {}, [])
    with pytest.raises(ImageError, match="unprivileged"):
        command.node_command(sif, {}, [], user="root")


def test_missing_sif_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"container image not found: .*nope\.sif"):
        command.node_command(tmp_path / "nope.sif", {}, [], user="syndeo-ci")


def test_corrupt_sif_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sif"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(ImageError, match="not a SIF image"):
        command.node_command(junk, {}, [], user="syndeo-ci")
