"""Lost workers come back: the launcher of a ``deploy`` starts a replacement for a rank
the head reports lost (``[recovery] replace_lost``), and records each loss.

The head already says which ranks joined and are gone (``status.nodes_lost``); a
replacement is a new node of the same rank, started by the target
(:meth:`Target.replace`), that joins the running head like any worker.  Every loss is
recorded with its times in ``deploy.json`` (``recovery``), replaced or not.
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

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def observe(self, launched: Launched, st: StatusRecord | None) -> None:
        """Called with every status the launcher reads."""
        if st is None:
            return
        lost = set(st.nodes_lost)
        for rank, event in list(self._open.items()):
            if rank not in lost and rank in st.nodes_joined:
                event["joined_s"] = self._now()
                if "replaced_s" in event:
                    event["replacement_joined_after_s"] = round(
                        event["joined_s"] - event["lost_s"], 3
                    )
                    self.ui.info(f"rank {rank}: its replacement joined")
                del self._open[rank]
        for rank in sorted(lost - set(self._open)):
            event = {"rank": rank, "lost_s": self._now()}
            self.events.append(event)
            self._open[rank] = event
            self._replace(launched, rank, event)

    def _replace(self, launched: Launched, rank: int, event: dict[str, Any]) -> None:
        if not self.enabled:
            event["replaced"] = "no: [recovery] replace_lost is off"
            return
        if self.left <= 0:
            event["replaced"] = "no: max_replacements reached"
            self.ui.info(f"rank {rank} lost; no replacement (max_replacements reached)")
            return
        self.left -= 1
        try:
            started = self.target.replace(launched, self.spec, rank)
        except SyndeoError as exc:
            event["replaced"] = f"no: {exc}"
            self.ui.info(f"rank {rank} lost; its replacement could not start: {exc}")
            return
        event["replaced"] = started
        event["replaced_s"] = self._now()
        self.ui.info(f"rank {rank} lost; started a replacement: {started}")
