"""A requirements file lists packages and nothing else (syndeo/launcher/wheelhouse.py).

The file may come from a work dir that others can write; pip on the launcher would follow
its option lines (another index, links, included files, ``--no-binary``, ``-e``) and its
URLs and paths, and build a source package there, running its setup.py.  Every such line
is refused in one line before anything is resolved; pip runs in Python's isolated mode in
a directory of its own, so a ``pip`` package in the directory the launcher runs in is not
imported.  No network: pip reads a links directory of this test's (PIP_FIND_LINKS,
PIP_NO_INDEX: pip's own configuration on the launcher, which it keeps following).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher import wheelhouse
from tests.support.helpers import syndeo
from tests.support.wheels import marking_sdist, plant_pip, wheel

PROBE = "syndeo_options_probe"


@pytest.fixture
def links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip's packages on this launcher: a links directory with a wheel of PROBE and a source
    package ``markpkg`` only, and no index."""
    where = tmp_path / "links"
    where.mkdir()
    name, data = wheel(PROBE)
    (where / name).write_bytes(data)
    marking_sdist(where, "markpkg", tmp_path / "setup-py-ran")
    monkeypatch.setenv("PIP_FIND_LINKS", str(where))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return where


def _names(archive: bytes | None) -> list[str]:
    assert archive is not None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return tar.getnames()


def _refusal(tmp_path: Path, text: str) -> str:
    """The one line that refuses a requirements file of ``text``; "" if it resolved."""
    req = tmp_path / "requirements.txt"
    req.write_text(text)
    try:
        wheelhouse.resolve(req, "3.11")
    except ConfigError as err:
        return str(err)
    return ""


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("--index-url https://pypi.example/simple", "pip's own configuration on this machine"),
        ("-i https://pypi.example/simple", "pip's own configuration"),
        ("--extra-index-url=https://pypi.example/simple", "pip's own configuration"),
        ("--trusted-host pypi.example", "pip's connections are set in its own configuration"),
        ("-f /tmp", "pip's own configuration"),
        ("--find-links /tmp", "pip's own configuration"),
        ("--no-binary :all:", "binary wheels only"),
        ("--no-binary=markpkg", "binary wheels only"),
        ("-e .", "never built here"),
        ("-r other.txt", "no other file is read"),
        ("-c constraints.txt", "no other file is read"),
        ("--pre", "options are not read"),
        (f"{PROBE} --index-url https://pypi.example/simple", "options are not read"),
        (f"{PROBE} --config-settings=x=y", "options are not read"),
        ("markpkg @ https://pypi.example/markpkg-1.0.tar.gz", "a URL or a path is not read"),
        ("https://pypi.example/markpkg-1.0.tar.gz", "a URL or a path is not read"),
        ("./markpkg", "a URL or a path is not read"),
        ("markpkg-1.0.tar.gz", "a URL or a path is not read"),
        ("markpkg==${HOME}", "not a package"),
    ],
)
def test_anything_but_a_package_is_one_line_before_anything_is_resolved(
    tmp_path: Path, syndeo_home: Path, line: str, says: str
) -> None:
    # Continued with a backslash, as pip reads it: the option is on the file's line 3.
    err = _refusal(tmp_path, f"# packages\n{PROBE}\n{line[:3]}\\\n{line[3:]}\n")
    assert err.startswith(f"--requirements {tmp_path / 'requirements.txt'} line 3: ")
    assert line.replace(" ", "")[:20] in err.replace(" ", "") and says in err
    assert "\n" not in err
    assert not (syndeo_home / "wheelhouses").exists()  # nothing resolved, nothing cached


def test_no_binary_never_builds_a_source_package_on_the_launcher(
    tmp_path: Path, syndeo_home: Path, links: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--no-binary`` in the file outweighs the launcher's ``--only-binary=:all:``, and a
    URL or path is built whatever it says: setup.py would run on this machine."""
    # A build would need nothing from an index: this venv's setuptools (pip reads 0 as
    # "no isolation").
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    sdist = links / "markpkg-1.0.tar.gz"
    for text in (
        f"--find-links {links}\n--no-binary markpkg\nmarkpkg\n",
        "--no-binary markpkg\nmarkpkg\n",
        f"markpkg @ {sdist.as_uri()}\n",
        f"{sdist}\n",
    ):
        err = _refusal(tmp_path, text)
        assert not (tmp_path / "setup-py-ran").exists(), text
        assert "line 1" in err or "line 2" in err
    # Without them the launcher takes wheels only: a package with only a source package
    # is refused as having no wheel for the nodes, never built.
    err = _refusal(tmp_path, "markpkg\n")
    assert "no wheel of markpkg for the nodes" in err
    assert not (tmp_path / "setup-py-ran").exists()


def test_a_package_with_its_hash_resolves(tmp_path: Path, syndeo_home: Path, links: Path) -> None:
    name, data = wheel(PROBE)
    req = tmp_path / "requirements.txt"
    req.write_text(f"{PROBE}==1.0 --hash=sha256:{hashlib.sha256(data).hexdigest()}\n")
    archive = wheelhouse.resolve(req, "3.11")
    assert _names(archive) == [name]


def test_pip_imports_nothing_from_the_directory_the_launcher_runs_in(
    tmp_path: Path, syndeo_home: Path, links: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "planted-code-ran"
    workdir = tmp_path / "work"
    plant_pip(workdir, marker)
    (workdir / "requirements.txt").write_text(f"{PROBE}\n")
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("PYTHONPATH", str(workdir))
    archive = wheelhouse.resolve(Path("requirements.txt"), "3.11")
    assert not marker.exists(), f"pip imported the planted {marker.read_text()}"
    assert _names(archive) == [wheel(PROBE)[0]]


def test_the_command_line_says_it_in_one_line_before_anything_starts(
    tmp_path: Path, syndeo_home: Path
) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("typer\n--extra-index-url https://pypi.example/simple\n")
    proc = syndeo(
        "deploy", "--run", "python prog.py", "--requirements", str(req), cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    [err] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "line 2" in err and "--extra-index-url" in err and "Traceback" not in proc.stderr
    assert not (syndeo_home / "rendezvous").exists()
