"""Nodes lost under a running repeat, as the benchmark's driver sees them.

The count of samples stays exact across a lost node (Ray restarts the actors and
re-runs the lost tasks); what a loss costs is throughput.  While it waits for
samples the driver asks Ray for its alive nodes at most once a second, and for each
time the cluster fell below its size records when (seconds into the run), how fast
samples came before the loss and until the cluster was whole again (a replacement
joined), and the dip between the two.  "When" is when Ray declared the node dead
(its health check), not the instant it died: the stall before that counts as
"before".
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

# Ray's node table is a GCS call: once a second is invisible next to the samples.
WATCH_EVERY_S = 1.0


class NodeLoss(BaseModel):
    """The cluster below its size during one run of the actors."""

    repeat: int | None = Field(description="measured repeat (0-based); null: the warm-up")
    lost_at_s: float = Field(description="seconds into the run when Ray declared it dead")
    nodes_before: int
    nodes_after: int = Field(description="alive nodes right after the loss")
    back_at_s: float | None = Field(
        default=None, description="seconds into the run when the cluster was whole again"
    )
    steps_per_s_before: float = Field(description="from the run's start to the loss")
    steps_per_s_until_back: float | None = Field(
        default=None, description="from the loss until whole again (or the run's end)"
    )
    dip: float | None = Field(
        default=None, description="1 - until_back / before: the share of throughput lost"
    )


def alive_nodes() -> int:
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return sum(1 for n in nodes if n.get("Alive"))


class NodeWatch:
    """Watches one run (a repeat or the warm-up) of an actor group."""

    def __init__(self, full: int, repeat: int | None, count: Any = alive_nodes) -> None:
        self.full, self.repeat, self._count = full, repeat, count
        self.t0 = time.perf_counter()
        self._next = self.t0 + WATCH_EVERY_S
        self.losses: list[NodeLoss] = []
        self._open: tuple[NodeLoss, int] | None = None  # the loss, samples counted then

    def tick(self, counted: int) -> None:
        """Called as samples arrive (and while none do)."""
        now = time.perf_counter()
        if now < self._next:
            return
        self._next = now + WATCH_EVERY_S
        alive = self._count()
        at = now - self.t0
        if self._open is None and alive < self.full:
            loss = NodeLoss(
                repeat=self.repeat,
                lost_at_s=round(at, 3),
                nodes_before=self.full,
                nodes_after=alive,
                steps_per_s_before=round(counted / at, 1) if at > 0 else 0.0,
            )
            self._open = (loss, counted)
            self.losses.append(loss)
        elif self._open is not None and alive >= self.full:
            self._close(at, counted, back=True)

    def finish(self, counted: int) -> list[NodeLoss]:
        if self._open is not None:
            self._close(time.perf_counter() - self.t0, counted, back=False)
        return self.losses

    def _close(self, at: float, counted: int, back: bool) -> None:
        assert self._open is not None
        loss, counted_then = self._open
        span = at - loss.lost_at_s
        rate = (counted - counted_then) / span if span > 0 else 0.0
        loss.back_at_s = round(at, 3) if back else None
        loss.steps_per_s_until_back = round(rate, 1)
        if loss.steps_per_s_before > 0:
            loss.dip = round(1.0 - rate / loss.steps_per_s_before, 3)
        self._open = None
