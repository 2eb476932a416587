"""How a Terraform-backed target's launcher decides the head is gone for good.

A head refreshes its status every 2 s; one that stands still is either busy (Ray's GCS
marking a node dead once stalled a live head for 45 s) or gone with its machine.  A target
that can ask its provider (``machine_gone``; AWS asks EC2, tested whole in
tests/aws/test_lifecycle.py) ends the run once the provider says the head's machine is
gone; without an answer only HEAD_SILENT_S of silence counts.  The clock is the
launcher's own, stepped here instead of waited for.
"""

from __future__ import annotations

import time
import types
from pathlib import Path
from typing import Any

import pytest

from syndeo import __version__
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets import terraform
from syndeo.launcher.targets.terraform import HEAD_ASK_S, HEAD_SILENT_S, TerraformTarget
from syndeo.rendezvous import DoneRecord, HeadRecord, StatusRecord, open_rendezvous
from tests.support.launched import make_launched, spec_for


class _Target(TerraformTarget):
    """Only what ``poll`` reads: the rendezvous and the provider's answer."""

    name = "fake"
    module = "ssh"

    def __init__(self, answer: str | None) -> None:  # no config: poll needs none
        self._rdv = None
        self.echo = None
        self.answer = answer
        self.asked: list[float] = []

    def machine_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        return {}

    def default_rendezvous(self) -> str:
        return ""

    def machine_gone(self, launched: Launched, rank: int) -> str | None:
        assert rank == 0
        self.asked.append(clock.now)
        return self.answer


KEY = "ab" * 32  # the cluster's launch key, saved with its spec as `up` saves it


class _Clock:
    now = 1_000_000.0


clock = _Clock()


@pytest.fixture
def launched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Launched:
    monkeypatch.setattr(terraform, "time", types.SimpleNamespace(time=lambda: clock.now))
    uri = f"file://{tmp_path / 'rdv'}"
    rdv = open_rendezvous(uri, "hg", 0)
    rdv.publish_head(
        HeadRecord(
            cluster_id="hg",
            attempt=0,
            ip="127.0.0.1",
            gcs_port=9,
            ray_version="x",
            syndeo_version=__version__,
            nonce="n",
            created_at=time.time(),
            hostname="h",
        )
    )
    rdv.publish_status(StatusRecord(phase="running", nodes_expected=2, updated_at=1.0))
    return make_launched(
        "fake",
        "hg",
        uri,
        clock.now,
        part={"join_timeout": 60},
        spec=spec_for("fake", "hg", uri, launch_key=KEY),
    )


def _poll_for(target: _Target, launched: Launched, seconds: float) -> int | None:
    """Poll once a second of the launcher's clock for ``seconds``; the first answer."""
    end = clock.now + seconds
    while clock.now < end:
        code = target.poll(launched)
        if code is not None:
            return code
        clock.now += 1.0
    return None


def test_a_machine_the_provider_calls_gone_ends_the_run_after_the_first_ask(
    launched: Launched,
) -> None:
    target = _Target("EC2 lists its instance i-1 as terminated")
    assert _poll_for(target, launched, HEAD_ASK_S + 2) == 1
    assert target.asked == [launched.started_at + HEAD_ASK_S]  # asked once, when quiet
    assert launched.tf.head_failure == (
        f"the head vanished: no sign of it for {HEAD_ASK_S:.0f} s and EC2 lists its "
        "instance i-1 as terminated"
    )


def test_a_running_machine_is_asked_every_interval_and_silence_decides(
    launched: Launched,
) -> None:
    target = _Target(None)
    assert _poll_for(target, launched, HEAD_SILENT_S - 1) is None
    # Asked when quiet for HEAD_ASK_S, then at most every HEAD_ASK_S, not every poll.
    start = launched.started_at
    assert target.asked == [
        start + HEAD_ASK_S * k for k in range(1, int(HEAD_SILENT_S // HEAD_ASK_S))
    ]
    assert _poll_for(target, launched, 2) == 1
    assert launched.tf.head_failure.startswith(
        f"the head vanished: no sign of it for {HEAD_SILENT_S:.0f} s and no done record"
    )


def test_a_head_that_moves_again_is_not_asked(launched: Launched) -> None:
    key = KEY
    target = _Target("gone")
    rdv = open_rendezvous(launched.rendezvous, "hg", 0, KEY)
    for step in range(3 * int(HEAD_ASK_S)):
        # The head refreshes its status every 2 s, signed: never quiet long enough to ask.
        if step % 2 == 0:
            st = StatusRecord(
                cluster_id="hg", attempt=0, phase="running", nodes_expected=2, updated_at=2.0 + step
            )
            rdv.publish_status(st.signed(key))
        assert target.poll(launched) is None
        clock.now += 1.0
    assert target.asked == []


def test_only_the_heads_signed_done_record_ends_the_run(launched: Launched) -> None:
    """Whoever can write the store plants a done record and a log of rank 0: the VM
    cluster would bill on with nobody watching it.  Neither ends the run (said once);
    the head's own record, signed with the launch key, does."""
    key = KEY
    said: list[str] = []
    target = _Target(None)
    target.echo = said.append
    rdv = open_rendezvous(launched.rendezvous, "hg", 0, KEY)
    rdv.mark_done(DoneRecord(cluster_id="hg", attempt=0, exit_code=0, finished_at=2.0))
    rdv.put_log(0, "h: the head failed")
    for _ in range(3):
        assert target.poll(launched) is None
    assert said == ["fake: a done record not signed by this cluster's head: ignored"]
    other = DoneRecord(cluster_id="other", attempt=0, exit_code=0, finished_at=2.0)
    rdv.mark_done(other.signed(key))  # the head's record of another cluster
    assert target.poll(launched) is None
    done = DoneRecord(cluster_id="hg", attempt=0, exit_code=3, message="m", finished_at=2.0)
    rdv.mark_done(done.signed(key))
    assert target.poll(launched) == 3
    assert launched.tf.head_failure == "h: the head failed"


def test_a_status_rewritten_by_someone_else_is_no_sign_of_the_head(launched: Launched) -> None:
    """Whoever can write the store rewrites the status every second (unsigned): the
    head still counts as silent, and the run ends when it would without them."""
    target = _Target(None)
    rdv = open_rendezvous(launched.rendezvous, "hg", 0, KEY)
    end, code = clock.now + HEAD_SILENT_S + 2, None
    while code is None and clock.now < end:
        rdv.publish_status(StatusRecord(phase="running", nodes_expected=2, updated_at=clock.now))
        code = target.poll(launched)
        clock.now += 1.0
    assert code == 1
    assert "the head vanished" in launched.tf.head_failure
