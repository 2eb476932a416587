"""The emulated AWS (:mod:`syndeo.testbed.awsemu`): up once per session, as root.

``aws`` is its :class:`~syndeo.testbed.awsemu.State` (endpoint, admin key, the AMI
that stands for the baked image); ``aws_user`` runs ``invoke`` as the unprivileged
CI user with exactly the variables ``invoke aws-emulator.up`` tells a user to
export.  The emulator is torn down at the end of the session whatever happens (also
on Ctrl-C and SIGTERM), and nothing of it may survive.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

from syndeo.testbed import awsemu
from tests.userrun import CI_PYTHON, CI_USER, _chown, as_user

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / ".testbed" / "aws"


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # pytest tears fixtures down on this


@pytest.fixture(scope="session")
def aws(sif: Path) -> Iterator[awsemu.State]:
    assert os.geteuid() == 0, "the emulated AWS needs root (network namespaces)"
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        state = awsemu.up(BASE, sif)
        try:
            yield state
        finally:
            awsemu.down(BASE)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert awsemu.leftovers(BASE) == []


@dataclass
class AwsUser:
    """The CI user at a shell where the emulator's variables are exported."""

    root: Path
    state: awsemu.State

    @property
    def env(self) -> dict[str, str]:
        return {**self.state.env(), "SYNDEO_HOME": str(self.root / "home")}

    @property
    def results(self) -> Path:
        return self.root / "results"

    def argv(self, *args: str) -> list[str]:
        """``invoke ARGS`` as the CI user, from a shell of its own (cwd: its dir)."""
        return as_user([str(CI_PYTHON), "-m", "invoke", "-r", str(ROOT), *args], self.env)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=self.root,
        )  # fmt: skip

    def invoke(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, cwd=self.root, timeout=timeout,
            check=False,
        )  # fmt: skip

    def machine(self, *extra: str) -> list[str]:
        """The options of the README's AWS command line, on this emulator."""
        return [
            "--target", "aws", "--instance-type", "c7i.large", "--region", self.state.region,
            "--image", self.state.image_id, *extra,
        ]  # fmt: skip


@pytest.fixture
def aws_user(aws: awsemu.State) -> Iterator[AwsUser]:
    root = Path(f"/home/{CI_USER}/aws-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    _chown(root)
    yield AwsUser(root, aws)
    shutil.rmtree(root, ignore_errors=True)
