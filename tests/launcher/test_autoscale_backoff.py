"""How a cluster that follows demand retries a failed start: the refusal's kind (from
Slurm's own wording) and the per-group backoff it sets."""

from __future__ import annotations

import pytest

from syndeo.core.errors import ConfigError, TargetError
from syndeo.launcher.autoscale import QUOTA_S, TRANSIENT_MAX_S, TRANSIENT_S, Backoff, refusal_kind
from syndeo.launcher.targets.base import StartRefused
from syndeo.launcher.targets.slurm import commands


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        (
            "error: Batch job submission failed: Invalid account or account/partition "
            "combination specified",
            "permanent",
        ),
        (
            "error: Batch job submission failed: Requested node configuration is not available",
            "permanent",
        ),
        (
            "error: Batch job submission failed: Required partition not available (inactive or "
            "drain)",
            "quota",
        ),
        (
            "error: Batch job submission failed: Job violates accounting/QOS policy (job submit "
            "limit, user's size and/or time limits)",
            "quota",
        ),
        (
            "error: Batch job submission failed: Socket timed out on send/recv operation",
            "transient",
        ),
    ],
)
def test_sbatch_refusals_are_classified(said: str, kind: str) -> None:
    assert commands.refusal_kind(said) == kind
    assert refusal_kind(StartRefused(f"sbatch refused the job: {said}", kind)) == kind


def test_other_errors_are_classified() -> None:
    assert refusal_kind(ConfigError("unknown Slurm partition 'x'")) == "permanent"
    assert refusal_kind(TargetError("`squeue` did not answer")) == "transient"


def test_the_backoff_doubles_with_jitter_up_to_its_cap_and_a_permanent_refusal_stops() -> None:
    b = Backoff()
    waits = [b.failed("transient", 0.0) for _ in range(8)]
    for n, wait in enumerate(waits):
        full = min(TRANSIENT_MAX_S, TRANSIENT_S * 2**n)
        assert 0.75 * full <= wait <= full
    assert not b.ready(0.0) and b.ready(TRANSIENT_MAX_S)
    assert QUOTA_S * 0.75 <= Backoff().failed("quota", 0.0) <= QUOTA_S
    # Tries within two minutes of unmet demand, every one refused: few.
    b, now, tries = Backoff(), 0.0, 0
    while now < 120:
        tries += 1
        now += b.failed("transient", now)
    assert tries <= 8
    stop = Backoff()
    assert stop.failed("permanent", 0.0) == float("inf") and not stop.ready(1e9)
