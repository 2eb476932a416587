"""Lost workers come back: the launcher of a ``deploy`` starts a replacement for a rank
the head reports lost (``[recovery] replace_lost``), and records each loss.

The head already says which ranks joined and are gone (``status.nodes_lost``); a
replacement is a new node of the same rank, started by the target
(:meth:`Target.replace`), that joins the running head like any worker.  Every loss is
recorded with its times in ``deploy.json`` (``recovery``), replaced or not.

A spot notice comes before the loss: the head's status names the ranks whose node got
one (``status.interrupted``, with the node's notice time and the cloud's deadline), and
such a rank is replaced at once, while the old VM still runs drained.  Its loss, when
the cloud takes the VM, belongs to the same event and is not replaced again.
"""

from __future__ import annotations

import time
from typing import Any

from syndeo.core.errors import SyndeoError
from syndeo.launcher.config import RecoverySettings
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.base import Target
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import StatusRecord


class Recovery:
    def __init__(
        self, target: Target, spec: ClusterSpec, settings: RecoverySettings, ui: Ui
    ) -> None:
        self.target, self.spec, self.ui = target, spec, ui
        self.enabled = settings.replace_lost
        self.left = settings.max_replacements
        self.events: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}  # rank -> its loss, until it is back
        self._t0 = time.monotonic()
        self._t0_wall = time.time()  # the node's notice times are wall-clock
        self._noticed: set[tuple[int, float]] = set()  # (rank, noticed_at) handled

    @property
    def pending(self) -> bool:
        """A loss or notice whose replacement has not joined yet."""
        return bool(self._open)

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def observe(self, launched: Launched, st: StatusRecord | None, replace: bool = True) -> None:
        """Called with every status the launcher reads.  ``replace=False`` once the
        workload is done: a replacement that joined is still recorded, but nodes that
        leave at teardown are not losses."""
        if st is None:
            return
        lost = set(st.nodes_lost)
        noticed = {n.rank for n in st.interrupted}
        for rank, event in list(self._open.items()):
            if rank in lost and "interrupted" in event and "lost_s" not in event:
                event["lost_s"] = self._now()  # the cloud took the VM
            if rank not in lost and rank not in noticed and rank in st.nodes_joined:
                event["joined_s"] = self._now()
                if "replaced_s" in event:
                    since = event["notice_s"] if "interrupted" in event else event["lost_s"]
                    event["replacement_joined_after_s"] = round(event["joined_s"] - since, 3)
                    self.ui.info(f"rank {rank}: its replacement joined")
                del self._open[rank]
        if not replace:
            return
        for note in st.interrupted:
            if (note.rank, note.noticed_at) in self._noticed:
                continue
            self._noticed.add((note.rank, note.noticed_at))
            event = {
                "rank": note.rank,
                "interrupted": note.cloud or "drained",
                "action": note.action,
                "notice_s": self._wall(note.noticed_at),
                "deadline_s": self._wall(note.deadline) if note.deadline else None,
                "seen_s": self._now(),
            }
            if note.rank in self._open:
                # Lost first, notice read after: a drained node with nothing to do is
                # let go by Ray at once.  Its replacement is under way; the notice
                # says why it was lost.
                self._open[note.rank].update(event)
                continue
            self.events.append(event)
            self._open[note.rank] = event
            left = "" if note.deadline is None else f", {note.deadline - time.time():.0f} s left"
            self.ui.info(f"rank {note.rank}: spot notice ({note.cloud or 'drained'}{left})")
            self._replace(launched, note.rank, event)
        for rank in sorted(lost - set(self._open)):
            event = {"rank": rank, "lost_s": self._now()}
            self.events.append(event)
            self._open[rank] = event
            self._replace(launched, rank, event)

    def _wall(self, t: float) -> float:
        """An epoch time (a node's) as seconds from the launch, like the other times."""
        return round(t - self._t0_wall, 3)

    def _replace(self, launched: Launched, rank: int, event: dict[str, Any]) -> None:
        if rank in launched.demand_ranks:
            # Its group follows demand: Ray's autoscaler asks again for what it still
            # needs, and the watcher starts that (syndeo/launcher/autoscale.py), so no
            # replacement, and none of max_replacements used.
            event["replaced"] = "no: its group follows demand (Ray's autoscaler asks again)"
            return
        if not self.enabled:
            event["replaced"] = "no: [recovery] replace_lost is off"
            return
        if self.left <= 0:
            event["replaced"] = "no: max_replacements reached"
            self.ui.info(f"rank {rank} lost; no replacement (max_replacements reached)")
            return
        self.left -= 1
        if "interrupted" in event:
            # The old node still runs, drained, until the cloud takes its VM: a target
            # that can leave it alone until then does (local: it stays till stop).
            launched.draining = sorted({*launched.draining, rank})
        # When the launcher started it: a VM target's apply takes a while, and the
        # replacement may have joined before it returns.
        begun = self._now()
        try:
            started = self.target.replace(launched, self.spec, rank)
        except SyndeoError as exc:
            event["replaced"] = f"no: {exc}"
            self.ui.info(f"rank {rank} lost; its replacement could not start: {exc}")
            return
        event["replaced"] = started
        event["replaced_s"] = begun
        event["replace_took_s"] = round(self._now() - begun, 3)
        why = "got a spot notice" if "interrupted" in event else "lost"
        self.ui.info(f"rank {rank} {why}; started a replacement: {started}")
