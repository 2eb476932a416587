"""The quick tier (``scripts/test --quick``, ``pytest --quick``): the tests that need no
root, no Slurm, no Apptainer, no emulator or object-store server and no Ray cluster.

Which tests those are is said by markers, in one place: a test carrying any marker in
:data:`NEEDS_MORE` is left out of the quick tier (and reported as deselected, never
skipped).  The guard below keeps the markers honest: while a quick-tier test runs it
watches the test's own process tree, and a test that starts Ray or a test bed's server
fails with what it started and the marker it lacks.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Generator

import psutil
import pytest

# Each marker means "needs more than the quick tier has" (pyproject.toml describes them).
NEEDS_MORE = ("cluster", "slow", "root", "tools", "apptainer", "slurm", "objectstore", "ssh", "aws")

# What a quick-tier test must not start: process name -> (what it is, the marker it needs).
_BY_NAME = {
    "raylet": ("a Ray node (raylet)", "cluster"),
    "gcs_server": ("a Ray head (gcs_server)", "cluster"),
    "slurmctld": ("a Slurm controller", "slurm"),
    "slurmd": ("a Slurm node daemon", "slurm"),
    "sshd": ("an sshd", "ssh"),
    "squashfuse": ("an Apptainer image mount (squashfuse)", "apptainer"),
    "squashfuse_ll": ("an Apptainer image mount (squashfuse)", "apptainer"),
    "fake-gcs-server": ("the GCS wire-protocol server", "objectstore"),
    # Switching users works for root alone: as any other user the test would fail.
    "runuser": ("a command as another user (runuser)", "root"),
}
# ...and words of a command line (for servers that run under an interpreter).
_BY_ARGV = {
    "moto_server": ("the S3/STS wire-protocol server (moto_server)", "objectstore"),
    "moto.server": ("the S3/STS wire-protocol server (moto)", "objectstore"),
    "azurite": ("the Azure Blob wire-protocol server (Azurite)", "objectstore"),
}
# Apptainer by the executable that runs: a test's stand-in of that name (a script,
# tests/test_targets.py) records how it was called and starts nothing.
_APPTAINER = {os.path.realpath(p) for p in filter(None, [shutil.which("apptainer")])}
_APPTAINER_NAMES = ("starter", "starter-suid")  # its runtime, whoever started it


def _what(proc: psutil.Process) -> tuple[str, str] | None:
    try:
        name = proc.name()
        argv = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    for key, found in _BY_NAME.items():
        if name == key or (key == "fake-gcs-server" and name.startswith(key)):
            return found
    for word in argv[:3]:  # the interpreter, maybe `-m`, the program
        base = os.path.basename(word)
        for key, found in _BY_ARGV.items():
            if base.startswith(key):
                return found
    try:
        exe = os.path.realpath(proc.exe()) if proc.exe() else ""
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        exe = ""
    if name in _APPTAINER_NAMES or exe in _APPTAINER:
        return ("an Apptainer container", "apptainer")
    return None


class _Watch:
    """Samples this process's descendants every ``interval`` s until stopped."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.seen: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quick-guard", daemon=True)
        self._me = psutil.Process()
        # What runs already was started by an earlier test (a module's fixture): that
        # test is the one to blame, not this one.
        self._before = {p.pid for p in self._children()}

    def _children(self) -> list[psutil.Process]:
        try:
            return self._me.children(recursive=True)
        except psutil.Error:
            return []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, str]:
        self._stop.set()
        self._thread.join()
        self._sample()  # whatever is still there at the end
        return self.seen

    def _sample(self) -> None:
        for child in self._children():
            if child.pid in self._before:
                continue
            found = _what(child)
            if found is not None:
                self.seen.setdefault(*found)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()


class QuickGuard:
    """A pytest plugin, registered only under ``--quick``."""

    def __init__(self) -> None:
        self._watch: _Watch | None = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        self._watch = _Watch()
        self._watch.start()
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield)
        finally:
            seen = self._watch.stop() if self._watch is not None else {}
            self._watch = None
            if seen:
                what = "; ".join(f"{w} (needs the `{m}` marker)" for w, m in seen.items())
                pytest.fail(f"quick tier: this test started {what}", pytrace=False)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if self._watch is not None:  # setup failed: the call never ran
            self._watch.stop()
            self._watch = None


def needs_more(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) is not None for m in NEEDS_MORE)
