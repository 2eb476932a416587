"""Which added nodes came and went, and when: what ``status`` counts as cost so far.

A node ``grow`` or the autoscaler adds is paid for from the request that starts it to its
end, even after it is gone (a cloud bills a VM let go an hour ago for the hour it ran).
The target's saved state names only the nodes added now (:meth:`Target.added`), so the
launcher keeps, in the cluster's state (:attr:`Launched.ledger`), one entry per added
rank: its group, when it was asked for and when it ended (None while it runs).  The
watcher notes after each poll and ``grow``/``shrink`` after each change, all under the
cluster's lock; an end is seen at the latest one poll after it happened.
"""

from __future__ import annotations

from syndeo.launcher.spec import Launched, LedgerEntry


def note(launched: Launched, added: dict[str, list[int]], asked_at: float, now: float) -> None:
    """Bring the ledger of ``launched`` in line with ``added`` (per group, the ranks added
    now): a rank not in it yet was asked for at ``asked_at`` (the time just before the
    change that started it), an entry whose rank is no longer added ended at ``now``."""
    live = {(g, r) for g, ranks in added.items() for r in ranks}
    running = set()
    for e in launched.ledger:
        if e.end is None and (e.group, e.rank) not in live:
            e.end = now
        elif e.end is None:
            running.add((e.group, e.rank))
    for group, rank in sorted(live - running):
        launched.ledger.append(LedgerEntry(group=group, rank=rank, start=asked_at))


def node_seconds(launched: Launched, group: str, now: float) -> tuple[float, set[int]]:
    """(seconds the group's added nodes have run, gone ones too; the ranks it knows)."""
    total, ranks = 0.0, set()
    for e in launched.ledger:
        if e.group == group:
            end = now if e.end is None else e.end
            total += max(0.0, end - e.start)
            ranks.add(e.rank)
    return total, ranks
