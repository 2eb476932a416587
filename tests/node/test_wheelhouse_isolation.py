"""pip on a node (syndeo/node/wheelhouse.py) gets nothing a task must not have.

The head's job agent installs a job's wheels while other jobs run as the same user: pip
is then a process any task can read the environment of, and it starts in whatever
directory the node runs in with whatever PYTHONPATH the node has.  A real install of a
real wheel: pip is started through a recorder on ``sys.executable`` (a shell script that
writes down its environment, arguments and working directory and then execs this
Python), with a ``pip`` package and a ``sitecustomize`` planted where a task could put
them (the current directory, PYTHONPATH) and the launch key in the node's environment.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from syndeo.core.nodeconfig import LAUNCH_KEY_VAR, NodeSettings
from syndeo.node import wheelhouse
from syndeo.rendezvous import open_rendezvous
from tests.support.wheels import plant_pip
from tests.support.wheels import wheelhouse as wheelhouse_archive


def _recorder(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for ``sys.executable`` that records how pip is started, then runs it."""
    record = tmp_path / "record"
    record.mkdir()
    script = tmp_path / "python-recorder"
    script.write_text(
        "#!/bin/sh\n"
        f'cat /proc/$$/environ > "{record}/environ"\n'
        f'printf "%s\\n" "$@" > "{record}/argv"\n'
        f'pwd > "{record}/cwd"\n'
        f'stat -c %a . > "{record}/cwd-mode"\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    script.chmod(0o755)
    return script, record


def test_pip_runs_without_the_nodes_secrets_and_imports_nothing_planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "planted-code-ran"
    planted = tmp_path / "task-writable"
    plant_pip(planted, marker)
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    monkeypatch.setenv(LAUNCH_KEY_VAR, "the-launch-key")
    # pip's own variables are the node's too (pip --isolated): this one would refuse the wheel.
    (tmp_path / "constraints.txt").write_text("syndeo-isolation-probe==2.0\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(tmp_path / "constraints.txt"))
    recorder, record = _recorder(tmp_path)
    monkeypatch.setattr(sys, "executable", str(recorder))

    rdv = open_rendezvous((tmp_path / "rdv").as_uri(), "wheels", launch_key="cd" * 32)
    archive = wheelhouse_archive("syndeo_isolation_probe")
    digest = hashlib.sha256(archive).hexdigest()
    rdv.put_wheelhouse(digest, archive)
    target, installed = wheelhouse.install_digest(rdv, digest, tmp_path / "scratch" / "pylibs")

    assert installed and (target / "syndeo_isolation_probe" / "__init__.py").is_file()
    assert not marker.exists(), f"pip imported the planted {marker.read_text()}"
    environ = dict(
        item.split("=", 1) for item in (record / "environ").read_text().split("\0") if item
    )
    assert LAUNCH_KEY_VAR not in environ
    argv = (record / "argv").read_text().splitlines()
    assert argv[:4] == ["-I", "-m", "pip", "--isolated"]
    cwd = Path((record / "cwd").read_text().strip())
    assert cwd != planted and not cwd.exists()  # its own, gone with the install
    assert (record / "cwd-mode").read_text().strip() == "700"


def test_the_node_side_environment_is_rays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip's environment is the one Ray's processes get: the store's credentials out too."""
    from syndeo.node.raynode import child_env

    monkeypatch.setenv(LAUNCH_KEY_VAR, "the-launch-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "store-secret")
    s = NodeSettings.model_validate(
        {"cluster_id": "wh", "rank": 0, "nodes": 1, "scratch": "/tmp/sy-wh/0"}
        | {"rendezvous": "s3://bucket/prefix", "target": "aws"}
    )
    rdv = open_rendezvous(s.rendezvous, s.cluster_id)
    env = wheelhouse.pip_env(rdv)
    # The same, less where Ray's processes find the jobs' packages (pip needs none).
    assert env == {k: v for k, v in child_env(s).items() if k != wheelhouse.PYLIBS_VAR}
    assert "AWS_SECRET_ACCESS_KEY" not in env and LAUNCH_KEY_VAR not in env
    assert env["PATH"] == os.environ["PATH"]
