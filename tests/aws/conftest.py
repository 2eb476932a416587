"""The emulated AWS (:mod:`testbeds.awsemu`): up once for tests/aws, as root.

``aws`` is its :class:`~testbeds.awsemu.State` (endpoint, admin key, the AMI
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

from testbeds import awsemu
from testbeds.users import CI_PYTHON, CI_USER, as_user, give_to_ci_user

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / ".testbed" / "aws"


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # pytest tears fixtures down on this


@pytest.fixture(scope="package")  # down again before the rest of the suite runs
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


def failed(res: subprocess.CompletedProcess[str]) -> str:
    """What a failed command printed, with the emulated machines' consoles."""
    return f"{res.stdout}\n{res.stderr}\n{awsemu.logs(BASE)}"


@dataclass
class AwsUser:
    """The CI user at a shell where the emulator's variables are exported."""

    root: Path
    state: awsemu.State

    @property
    def home(self) -> Path:
        """Its SYNDEO_HOME, beside its dir (a work dir may not hold the launcher's state)."""
        return self.root.with_name(self.root.name + ".home")

    @property
    def env(self) -> dict[str, str]:
        return {**self.state.env(), "SYNDEO_HOME": str(self.home)}

    @property
    def results(self) -> Path:
        return self.root / "results"

    def argv(self, *args: str) -> list[str]:
        """``invoke ARGS`` as the CI user, from a shell of its own (cwd: its dir)."""
        return as_user([str(CI_PYTHON), "-m", "invoke", "-r", str(ROOT), *args], self.env)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``invoke ARGS`` in a session of its own (what a terminal's Ctrl-C would reach)."""
        return subprocess.Popen(
            self.argv(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            start_new_session=True,
        )

    def invoke(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        proc = self.start(*args)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # As a user would: Ctrl-C (the launcher destroys what it made), then KILL.
            os.killpg(proc.pid, signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            tail = f"{out[-3000:]}{err[-3000:]}\n{awsemu.logs(BASE)}"
            raise AssertionError(f"`invoke {' '.join(args)}` timed out: {tail}") from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def machine(self, *extra: str) -> list[str]:
        """The options of the AWS command line in docs/targets/aws.md, on this emulator."""
        return [
            "--target",
            "aws",
            "--instance-type",
            "c7i.xlarge",
            "--region",
            self.state.region,
            "--image",
            self.state.image_id,
            *extra,
        ]


@pytest.fixture
def admin(aws: awsemu.State, monkeypatch: pytest.MonkeyPatch) -> awsemu.State:
    """This test process speaks to the emulator as its admin (boto3, the rendezvous)."""
    import boto3

    for k, v in aws.env().items():
        monkeypatch.setenv(k, v)
    # boto3.client() uses a default session that keeps the credentials it first found:
    # one made earlier in this process by another module would still hold that
    # module's keys.  A new one reads the admin's from the environment just set.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return aws


@pytest.fixture
def shared_bucket(admin: awsemu.State) -> Iterator[str]:
    """An existing bucket clusters share (``--rendezvous s3://<it>/team``); emptied and
    removed afterwards."""
    import boto3

    s3 = boto3.resource("s3", endpoint_url=admin.endpoint, region_name=admin.region)
    name = f"syndeo-shared-{uuid.uuid4().hex[:8]}"
    bucket = s3.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        bucket.objects.all().delete()
        bucket.delete()


@pytest.fixture
def aws_user(aws: awsemu.State) -> Iterator[AwsUser]:
    root = Path(f"/home/{CI_USER}/aws-{uuid.uuid4().hex[:8]}")
    root.mkdir(mode=0o700)
    give_to_ci_user(root)
    user = AwsUser(root, aws)
    yield user
    for path in (root, user.home):
        shutil.rmtree(path, ignore_errors=True)
