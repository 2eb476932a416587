"""The workload's extra packages on this node: the wheels the launcher resolved
(syndeo/launcher/wheelhouse.py) fetched from the rendezvous by their sha256, checked,
and installed with pip from those files alone (no index: compute nodes seldom reach
one).  Ray's processes and the workload find them through PYTHONPATH, ahead of nothing
the image has: the launcher left out every package the image pins.

Two users: ``deploy`` (every node, before Ray starts: :func:`install`) and ``submit`` on
an ``up`` cluster (:class:`Installer`): the head's job agent publishes the digests its
jobs need (a record it signs), and every node -- the head too -- installs what it lacks
into one directory per digest below its own scratch (``$SYNDEO_PYLIBS/<digest>``, kept
for the cluster's life: a second job with the same wheels installs nothing), in a thread
beside its loop, and says per rank what it has.  A node that joins later installs every
wanted digest before it starts Ray, so no task lands on it first.  The job's workers
find their node's copy through ``PYTHONPATH=${SYNDEO_PYLIBS}/<digest>``, which Ray
expands with each worker's own environment: the wheels never pass through Ray.

pip runs as a process of its own while tasks may already run (the job agent's case), so
it gets nothing they must not have: the environment Ray's processes get (without the
launch key and the store's credentials: a process of the node's user can read another's
environment while it runs), Python's isolated mode (``-I``: no PYTHON* variables, no user
site, no working directory on ``sys.path``, so no ``pip`` or ``sitecustomize`` a task
planted is imported), pip's (``--isolated``: no PIP_* variables, no configuration files)
and a private, empty working directory.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from syndeo.core.archive import safe_extract
from syndeo.core.errors import NodeError, SyndeoError
from syndeo.core.nodeconfig import LAUNCH_KEY_VAR, NodeSettings
from syndeo.node.workdir import await_blob
from syndeo.rendezvous import ReadyRecord, Rendezvous, without_secrets

PIP_TIMEOUT_S = 900.0
# Where a node's Ray processes find the jobs' packages (syndeo/node/raynode.py: child_env).
PYLIBS_VAR = "SYNDEO_PYLIBS"
# This node's architecture, as the launcher names the wheels' (``uname -m``).
ARCH = platform.machine()
# How often a node of an `up` cluster looks at the wanted record.
SYNC_EVERY_S = 3.0
# Written last into a digest's directory: a half-done install (a node that died in pip)
# is never taken for a finished one.
COMPLETE = ".syndeo-installed"
# What a wheelhouse may unpack to on a node (a bomb's cap, not a package's: torch's
# wheels with CUDA are a few GiB); the node's free space is checked first.
MAX_UNPACKED = 64 * 2**30


def install(rdv: Rendezvous, s: NodeSettings) -> dict[str, str]:
    """Install the wheels of ``SYNDEO_WHEELHOUSE_DIGEST``; the variables that make Ray's
    processes and the workload import them."""
    assert s.wheelhouse_digest is not None
    what = "the workload's wheels"
    data = await_blob(rdv.get_wheelhouse, s.wheelhouse_digest, s, what, rdv.poller)
    if data is None:
        raise NodeError("the workload's wheels in the rendezvous do not match their digest")
    target = s.scratch / "pylib"
    install_archive(data, target, s.scratch, pip_env(rdv))
    path = [str(target), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}


def install_digest(
    rdv: Rendezvous, digest: str, root: Path, log: Callable[[str], None] = lambda _m: None
) -> tuple[Path, str]:
    """The directory below ``root`` where the wheels of ``digest`` are installed, and what
    was done now: the packages and the bytes fetched ("": an earlier job installed them
    already).  The launcher stored them before it submitted the job, so they are read,
    not waited for: streamed into a file on ``root``'s disk (never whole in memory), then
    installed."""
    target = root / digest
    if (target / COMPLETE).is_file():
        return target, ""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".part-") as tmp:
        archive = Path(tmp) / "wheels.tar.gz"
        began, fetched = time.monotonic(), _Bytes()
        if not rdv.get_wheelhouse_file(digest, archive, fetched.add):
            raise NodeError("the job's wheels are missing from the rendezvous or do not match")
        took = max(time.monotonic() - began, 1e-3)
        figures = (
            f"{fetched.n / 2**20:.1f} MiB fetched in {took:.1f} s "
            f"({fetched.n / 2**20 / took:.1f} MiB/s)"
        )
        log(f"packages {digest[:12]}: {figures}")
        _room_for(root, archive.stat().st_size)
        with archive.open("rb") as fh:
            names = install_archive(fh, Path(tmp) / "lib", root, pip_env(rdv))
        archive.unlink()
        (Path(tmp) / "lib" / COMPLETE).write_text(digest + "\n")
        shutil.rmtree(target, ignore_errors=True)  # a half-done one, never finished
        (Path(tmp) / "lib").rename(target)
    return target, f"{', '.join(names)}: {figures}"


class _Bytes:
    def __init__(self) -> None:
        self.n = 0

    def add(self, n: int) -> None:
        self.n += n


def _room_for(root: Path, packed: int) -> None:
    """Refuse, in one line, wheels this node's scratch has no room to unpack and install
    (about twice their packed size: wheels compress little, pip copies each in place)."""
    free = shutil.disk_usage(root).free
    if free < 2 * packed:
        raise NodeError(
            f"no room on this node for the job's wheels: {packed / 2**20:.0f} MiB packed need "
            f"about {2 * packed / 2**20:.0f} MiB, {free / 2**20:.0f} MiB free in {root}"
        )


def pylibs(s: NodeSettings) -> Path:
    """This node's directory of the jobs' packages, one directory per digest."""
    return s.scratch / "pylibs"


class Installer:
    """Keeps this node's packages up to the head's wanted record: :meth:`sync` once (a
    node that joins, before it starts Ray), :meth:`start` a thread that syncs every
    :data:`SYNC_EVERY_S` beside the node's own loop (a slow install stalls nothing)."""

    def __init__(self, rdv: Rendezvous, s: NodeSettings, log: Callable[[str], None]) -> None:
        self.rdv, self.s, self.log = rdv, s, log
        self.have: set[str] = set()
        self.failed: dict[str, str] = {}
        self.notes: dict[str, str] = {}  # what this node did for each digest it installed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._said: list[str] | None = None

    def sync(self) -> None:
        """Install every wanted digest this node lacks, then say what it has."""
        wanted = self.rdv.read_wanted(self.s.launch_key)
        for digest in wanted.digests.get(ARCH, []) if wanted is not None else []:
            if digest in self.have or digest in self.failed:
                continue
            began = time.monotonic()
            try:
                target, installed = install_digest(self.rdv, digest, pylibs(self.s), self.log)
            except (SyndeoError, OSError) as exc:
                self.failed[digest] = str(exc)
                self.log(f"packages {digest[:12]}: {exc}")
                continue
            self.have.add(digest)
            if installed:
                size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
                took = time.monotonic() - began
                self.log(
                    f"packages {digest[:12]} installed in {took:.1f} s "
                    f"({size / 2**20:.1f} MiB installed)"
                )
                self.notes[digest] = (
                    f"{installed}, {size / 2**20:.1f} MiB installed in {took:.1f} s"
                )
            else:
                self.log(f"packages {digest[:12]} already installed here: nothing to do")
        self._report()

    def _report(self) -> None:
        said = sorted(self.have) + sorted(f"!{d}" for d in self.failed)
        if said == self._said:
            return  # nothing new: no write
        root = pylibs(self.s)
        free = shutil.disk_usage(root if root.is_dir() else self.s.scratch).free
        self.rdv.put_ready(
            ReadyRecord(
                rank=self.s.rank,
                arch=ARCH,
                digests=sorted(self.have),
                failed=self.failed,
                notes=self.notes,
                free_bytes=free,
                updated_at=time.time(),
            )
        )
        self._said = said

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pylibs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(SYNC_EVERY_S):
            try:
                self.sync()
            except Exception as exc:  # the store has a bad moment: try again next time
                self.log(f"packages: could not sync with the wanted record: {exc}")


def pip_env(rdv: Rendezvous) -> dict[str, str]:
    """This process's environment as pip gets it: what Ray's processes get
    (syndeo/node/raynode.py: ``child_env``), without the store's credentials and the
    launch key."""
    env = without_secrets(rdv.uri, os.environ)
    env.pop(LAUNCH_KEY_VAR, None)
    return env


def install_archive(
    data: bytes | BinaryIO, target: Path, scratch: Path, env: dict[str, str]
) -> list[str]:
    """pip installs the wheels in the archive ``data`` into ``target``, from those files
    alone (unpacked below ``scratch``), in the environment ``env``; what it installed
    (``name version`` of each wheel)."""
    with tempfile.TemporaryDirectory(dir=scratch, prefix="wheels-") as tmp:
        try:
            safe_extract(data, Path(tmp) / "w", MAX_UNPACKED)
        except (ValueError, tarfile.TarError) as exc:
            raise NodeError(f"the workload's wheels cannot be unpacked: {exc}") from None
        wheels = sorted(str(p) for p in (Path(tmp) / "w").glob("*.whl"))
        # Its own empty working directory (mkdtemp makes it 0700): nothing in it to import
        # or to read as a requirement, whatever directory this process runs in.
        cwd = Path(tmp) / "cwd"
        cwd.mkdir(mode=0o700)
        argv = [sys.executable, "-I", "-m", "pip", "--isolated", "install", "--no-index"]
        argv += ["--no-deps", "--no-cache-dir", "--disable-pip-version-check"]
        argv += ["--no-warn-script-location", "--quiet", "--target", str(target), *wheels]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env, cwd=cwd
            )
        except subprocess.TimeoutExpired:
            raise NodeError(
                f"installing the workload's wheels took over {PIP_TIMEOUT_S:.0f} s"
            ) from None
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["pip failed"]
        raise NodeError(f"cannot install the workload's wheels on this node: {last[0]}")
    # A wheel's file name is name-version-[build-]python-abi-platform.whl.
    return [" ".join(Path(w).name.split("-")[:2]) for w in wheels]
