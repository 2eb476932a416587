"""Predictable scratch paths on a machine shared with another user.

``syndeo-ci2`` (scripts/setup.d/second-user.sh) plays the other user: it creates,
first, the directory or symlink that a node or launcher of ``syndeo-ci`` (or the
other way round) is about to use.  Every such path is refused with one line, and
nothing is written into it.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# Another user plants directories and links at our paths: that user needs root to act as.
pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[2]
CI_PYTHON = ROOT / ".venv" / "ci-user" / "bin" / "python"  # scripts/setup.d/slurm.sh
VICTIM, OTHER = "syndeo-ci", "syndeo-ci2"


@pytest.fixture(autouse=True)
def _as_root() -> None:
    # Never skipped: a run that cannot switch users must fail, not drop these checks.
    assert os.geteuid() == 0, "the scratch ownership tests switch users (runuser): run as root"


def _as(user: str, argv: list[str], env: dict[str, str] | None = None, **kw: object) -> list[str]:
    pw = pwd.getpwnam(user)
    base = {"HOME": pw.pw_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    pairs = [f"{k}={v}" for k, v in {**base, **(env or {})}.items()]
    return ["runuser", "-u", user, "--", "env", "-i", *pairs, *argv]


def _run_as(
    user: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _as(user, argv, env), capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


@pytest.fixture
def victim_dir() -> Iterator[Path]:
    """A private working dir of the victim (rendezvous, SYNDEO_HOME, work dir)."""
    assert CI_PYTHON.exists(), f"{CI_PYTHON} missing: run scripts/setup.d/slurm.sh"
    for user in (VICTIM, OTHER):
        pwd.getpwnam(user)  # scripts/setup.d/{slurm,second-user}.sh create them
    d = Path(f"/home/{VICTIM}/sc-{uuid.uuid4().hex[:8]}")
    d.mkdir(mode=0o700)
    shutil.chown(d, VICTIM, VICTIM)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """Paths the other user planted in /tmp; removed afterwards."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        if p.is_symlink() or p.is_file():
            p.unlink()
        else:
            shutil.rmtree(p, ignore_errors=True)


def _node_env(victim_dir: Path, scratch: Path) -> dict[str, str]:
    return {
        "SYNDEO_CLUSTER_ID": "scratchtest",
        "SYNDEO_RANK": "1",
        "SYNDEO_NODES": "2",
        "SYNDEO_RENDEZVOUS": (victim_dir / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "3",
    }


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "syndeo" in ln and "error" in ln]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("kind", ["dir", "open-dir", "symlink"])
def test_node_refuses_a_scratch_path_another_user_made_first(
    victim_dir: Path, planted: list[Path], kind: str
) -> None:
    """What a Slurm node meets: ``<scratch_dir>/sy-<job>-<rank>`` already there."""
    scratch = Path(f"/tmp/sy-t{uuid.uuid4().hex[:8]}-1")
    bait = Path(f"{scratch}-bait")
    planted += [scratch, bait]
    assert _run_as(OTHER, ["mkdir", "-m", "0777", str(bait)]).returncode == 0
    if kind == "symlink":
        assert _run_as(OTHER, ["ln", "-s", str(bait), str(scratch)]).returncode == 0
    else:
        mode = "0777" if kind == "open-dir" else "0700"
        assert _run_as(OTHER, ["mkdir", "-m", mode, str(scratch)]).returncode == 0
    proc = _run_as(VICTIM, [str(CI_PYTHON), "-m", "syndeo", "node"], _node_env(victim_dir, scratch))
    line = _one_line(proc)
    assert f"refusing scratch dir {scratch}" in line, line
    assert ("symlink" if kind == "symlink" else f"belongs to {OTHER}") in line, line
    assert not list(bait.iterdir()) and (kind == "symlink" or not list(scratch.iterdir()))


def test_node_refuses_its_own_scratch_if_others_can_write_it(
    victim_dir: Path, planted: list[Path]
) -> None:
    scratch = Path(f"/tmp/sy-t{uuid.uuid4().hex[:8]}-1")
    planted.append(scratch)
    assert _run_as(VICTIM, ["mkdir", "-m", "0777", str(scratch)]).returncode == 0
    proc = _run_as(VICTIM, [str(CI_PYTHON), "-m", "syndeo", "node"], _node_env(victim_dir, scratch))
    assert "writable by group and others (mode 0777)" in _one_line(proc)


def test_container_node_checks_every_level_below_its_base(
    victim_dir: Path, planted: list[Path]
) -> None:
    """What a container node of the ssh and cloud targets meets: the node module's
    ``/var/tmp/sy-<hash>`` made first by the other user, open to all, and the real
    start script (terraform/modules/node/files/syndeo-node) whose ``mkdir -p`` then
    makes the node's own dir inside it -- ours and 0700, so a check of that leaf alone
    passes, while the other user can still swap it for theirs."""
    cluster = Path(f"/var/tmp/sy-t{uuid.uuid4().hex[:6]}")
    scratch = cluster / "1"
    planted.append(cluster)
    assert _run_as(OTHER, ["mkdir", "-m", "0777", str(cluster)]).returncode == 0
    # apptainer stands in for nothing but itself here: the image would run `syndeo node`
    # with the forwarded environment, which is what this does.
    bindir = victim_dir / "bin"
    bindir.mkdir()
    # Like Apptainer, it hands APPTAINERENV_SYNDEO_ENV_FD in as SYNDEO_ENV_FD (the pipe
    # the script fills with the node's variables).
    (bindir / "apptainer").write_text(
        "#!/bin/sh\nexport SYNDEO_ENV_FD=$APPTAINERENV_SYNDEO_ENV_FD\n"
        f"exec {CI_PYTHON} -m syndeo node\n"
    )
    env = {
        **_node_env(victim_dir, scratch),
        "SYNDEO_SCRATCH_BASE": "/var/tmp",
        "SYNDEO_IMAGE": "/nonexistent/syndeo.sif",
    }
    env_file = victim_dir / "node.env"
    env_file.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))
    script = ROOT / "terraform" / "modules" / "node" / "files" / "syndeo-node"
    for path in (bindir, bindir / "apptainer", env_file):
        shutil.chown(path, VICTIM, VICTIM)
    (bindir / "apptainer").chmod(0o755)
    proc = _run_as(
        VICTIM,
        ["bash", str(script), str(env_file)],
        {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin"},
    )
    line = _one_line(proc)
    assert f"refusing scratch dir {cluster}: it belongs to {OTHER}" in line, line
    assert scratch.is_dir() and not list(scratch.iterdir())  # made by mkdir -p, left empty


def test_local_launcher_refuses_a_planted_scratch_root_and_starts_nothing(
    victim_dir: Path, planted: list[Path]
) -> None:
    """The local target's ``/tmp/syndeo-<uid>`` made first by the other user."""
    # Here the roles swap: syndeo-ci2 launches, syndeo-ci planted (only this test ever
    # uses syndeo-ci2's scratch root, so it can be cleared first).
    uid = pwd.getpwnam(OTHER).pw_uid
    root = Path(f"/tmp/syndeo-{uid}")
    shutil.rmtree(root, ignore_errors=True)
    planted.append(root)
    assert _run_as(VICTIM, ["mkdir", "-m", "0777", str(root)]).returncode == 0
    home = Path(f"/home/{OTHER}/sc-{uuid.uuid4().hex[:8]}")
    home.mkdir(mode=0o700)
    shutil.chown(home, OTHER, OTHER)
    work = home / "work"  # the program's own dir, beside its SYNDEO_HOME (never around it)
    work.mkdir(mode=0o700)
    shutil.chown(work, OTHER, OTHER)
    try:
        proc = _run_as(
            OTHER,
            [
                str(CI_PYTHON),
                "-m",
                "syndeo",
                "deploy",
                "--target",
                "local",
                "--nodes",
                "1",
                "--cluster-id",
                "tplanted",
                "--run",
                "python -c pass",
            ],
            {"SYNDEO_HOME": str(home / "home")},
            cwd=work,
        )
        line = _one_line(proc)
        assert f"refusing scratch dir {root}: it belongs to {VICTIM}" in line, line
        assert not list(root.iterdir())  # nothing of ours went in
        assert not list((home / "home" / "clusters" / "tplanted").glob("node-*.log"))
    finally:
        shutil.rmtree(home, ignore_errors=True)
