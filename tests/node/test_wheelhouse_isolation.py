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

import base64
import hashlib
import io
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from syndeo.core.nodeconfig import LAUNCH_KEY_VAR
from syndeo.node import wheelhouse
from syndeo.rendezvous import open_rendezvous


def _wheel(name: str) -> tuple[str, bytes]:
    """A pure-Python wheel of one module ``name`` that says it was imported."""
    dist = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": b"IMPORTED = True\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return f"{name}-1.0-py3-none-any.whl", buf.getvalue()


def _wheelhouse(name: str) -> bytes:
    filename, data = _wheel(name)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(filename)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _plant(where: Path, marker: Path) -> None:
    """A ``pip`` package and a ``sitecustomize`` that leave ``marker`` when imported."""
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text(__name__)\n"
    (where / "pip").mkdir(parents=True)
    (where / "pip" / "__init__.py").write_text(code)
    (where / "pip" / "__main__.py").write_text(code)
    (where / "sitecustomize.py").write_text(code)


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
    _plant(planted, marker)
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    monkeypatch.setenv(LAUNCH_KEY_VAR, "the-launch-key")
    # pip's own variables are the node's too (pip --isolated): this one would refuse the wheel.
    (tmp_path / "constraints.txt").write_text("syndeo-isolation-probe==2.0\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(tmp_path / "constraints.txt"))
    recorder, record = _recorder(tmp_path)
    monkeypatch.setattr(sys, "executable", str(recorder))

    rdv = open_rendezvous((tmp_path / "rdv").as_uri(), "wheels")
    archive = _wheelhouse("syndeo_isolation_probe")
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
    from tests.node.test_poweroff import _settings

    monkeypatch.setenv(LAUNCH_KEY_VAR, "the-launch-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "store-secret")
    s = _settings(tmp_path).model_copy(update={"rendezvous": "s3://bucket/prefix"})
    rdv = open_rendezvous(s.rendezvous, s.cluster_id)
    env = wheelhouse.pip_env(rdv)
    assert env == child_env(s)
    assert "AWS_SECRET_ACCESS_KEY" not in env and LAUNCH_KEY_VAR not in env
    assert env["PATH"] == os.environ["PATH"]
