"""Your program's packages without a new image: ``--requirements``
(or requirements.txt in the work dir) resolved by the launcher into wheels for the nodes,
stored in the rendezvous by digest, installed on every node before Ray starts, with no
package index on the nodes."""

from __future__ import annotations

import functools
import io
import re
import tarfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from syndeo.core.errors import ConfigError
from syndeo.launcher import wheelhouse
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import _wheels
from syndeo.launcher.spec import ClusterSpec
from tests.support.helpers import read_json, syndeo
from tests.support.wheels import big_wheel

PROGRAM = """\
import ray, typer
ray.init()

@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def where():
    import time, typer, shellingham
    time.sleep(0.5)
    return ray.get_runtime_context().get_node_id(), typer.__file__

found = ray.get([where.remote() for _ in range(4)])
print("NODES", len({node for node, _ in found}))
print("DRIVER", typer.__file__)
for _, path in found:
    print("TASK", path)
"""


def _names(archive: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return tar.getnames()


def test_wheels_for_the_nodes_without_what_the_image_has(tmp_path: Path, syndeo_home: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("typer\n")
    archive = wheelhouse.resolve(req, "3.11")
    assert archive is not None
    names = [n.split("-")[0] for n in _names(archive)]
    assert "typer" in names and "shellingham" in names
    assert "click" not in names and "rich" not in names  # the image pins them
    # Resolved once: the launcher's cache, by what decides the wheels.
    [cached] = (syndeo_home / "wheelhouses").glob("*.tar.gz")
    assert cached.name == wheelhouse.cache_key(req, "3.11") + ".tar.gz"
    assert cached.read_bytes() == archive and wheelhouse.resolve(req, "3.11") == archive
    cached.unlink()
    assert wheelhouse.resolve(req, "3.11") == archive  # resolved again: the same bytes
    # Another Python or another file is another key: resolved, not taken from the cache.
    assert wheelhouse.cache_key(req, "3.12") != wheelhouse.cache_key(req, "3.11")
    (tmp_path / "only-image.txt").write_text("click\n")
    assert wheelhouse.resolve(tmp_path / "only-image.txt", "3.11") is None
    assert len(list((syndeo_home / "wheelhouses").glob("*.none"))) == 1


@pytest.fixture
def links_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A links page served over HTTP on 127.0.0.1 (a directory listing of its files), as
    a package index pip downloads from is; the directory and its URL."""
    links = tmp_path / "links"
    links.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(links))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield links, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_what_pip_downloads_is_said_with_bytes_and_rate(
    tmp_path: Path,
    syndeo_home: Path,
    links_server: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wheel that pip fetches over HTTP: the launcher says which, how large, and its
    bytes and rate as pip reports them, not only when the wheelhouse is done."""
    links, url = links_server
    big_wheel(links, "dlpkg", 6)
    for name, value in {"PIP_FIND_LINKS": url, "PIP_NO_INDEX": "1", "NO_PROXY": "*"}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "requirements.txt").write_text("dlpkg\n")
    said: list[str] = []
    assert wheelhouse.resolve_file(tmp_path / "requirements.txt", "3.11", "x86_64", said.append)
    assert "downloading dlpkg-1.0-py3-none-any.whl (6.3 MB)" in said, said
    done = r"downloading dlpkg-1\.0-py3-none-any\.whl: 6\.0 of 6\.0 MiB, [0-9.]+ MiB/s"
    assert any(re.fullmatch(done, line) for line in said), said


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("ray==2.9.0", "line 1: `ray==2.9.0` contradicts the image's `ray==2.60.0`"),
        ("numpy>=3", "line 1: `numpy>=3` contradicts the image's `numpy==2.4.6`"),
        ("nosuch-package-syndeo-test", "no wheel of nosuch-package-syndeo-test for the nodes"),
    ],
)
def test_bad_requirements_are_one_line_before_anything_starts(
    tmp_path: Path, syndeo_home: Path, line: str, says: str
) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text(line + "\n")
    proc = syndeo(
        "deploy", "--run", "python prog.py", "--requirements", str(req), cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    [err] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert says in err and "Traceback" not in proc.stderr
    assert not (syndeo_home / "rendezvous").exists()  # nothing claimed, nothing started


def test_a_pin_against_the_image_is_refused_before_pip_runs(
    tmp_path: Path, syndeo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named with both versions, and before any index is asked: pip here has none that
    answers, so only a refusal made before pip can name them."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    req = tmp_path / "requirements.txt"
    req.write_text("typer\nray[tune]\nray[data] ==2.40.0 ; python_version >= '3.8'\n")
    with pytest.raises(ConfigError) as exc:
        wheelhouse.resolve(req, "3.11")
    assert str(exc.value) == (
        f"--requirements {req} line 3: `ray==2.40.0` contradicts the image's `ray==2.60.0` "
        "(the nodes run the image's own ray): loosen the pin, or build an image with it "
        "(packer/apptainer/requirements.in)"
    )
    assert not (syndeo_home / "wheelhouses").exists()
    # Extras of a pinned project, a pin the image satisfies, a marker for other nodes: pass.
    ok = "ray[tune]\nray>=2.52,<3\nnumpy<2 ; python_version < '3.0'\nclick\n"
    wheelhouse.check_pins(req, ok, wheelhouse.image_pins(), "3.11")


def test_a_requirements_file_that_does_not_exist(tmp_path: Path) -> None:
    cfg = load_config(run="python prog.py", requirements=tmp_path / "nope.txt")
    spec = ClusterSpec.from_config(cfg, (tmp_path / "r").as_uri(), "req")
    with pytest.raises(ConfigError, match=r"nope\.txt: no such file"):
        _wheels(cfg, spec)
    # The benchmark needs nothing of yours; no file, no wheels.
    assert _wheels(load_config(requirements=tmp_path / "nope.txt"), spec) == (spec, None)


@pytest.mark.cluster
def test_a_package_from_requirements_txt_imports_on_every_node(
    syndeo_home: Path, tmp_path: Path
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "prog.py").write_text(PROGRAM)
    (proj / "requirements.txt").write_text("typer\n")
    with pytest.raises(ImportError):
        __import__("typer")  # not in this venv: the nodes get it from the wheels
    proc = syndeo(
        "deploy",
        "--nodes",
        "2",
        "--cluster-id",
        "reqs",
        "--workdir",
        str(proj),
        "--run",
        "python prog.py",
        "--results-dir",
        str(tmp_path / "res"),
        "--join-timeout",
        "240",
        cwd=tmp_path,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wheels for every node resolved" in proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    assert int(next(ln for ln in lines if ln.startswith("NODES")).split()[1]) == 2
    paths = [ln.split()[1] for ln in lines if ln.startswith(("DRIVER", "TASK"))]
    assert len(paths) == 5 and all("/pylib/typer/" in p for p in paths), paths
    assert read_json(tmp_path / "res" / "reqs" / "deploy.json")["exit_code"] == 0
