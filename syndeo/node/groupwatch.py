"""The head's view of its node groups: who is in which group, and is that enough.

Fed by the monitor with every look at Ray's node table (each node's ``syndeo-rank``
and ``syndeo-group`` labels); answers the readiness rule -- every group complete
(default) or, once the join deadline has passed, every group at its ``min_nodes`` --
and says which groups shrank, so the head can log it while the workload goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


class GroupWatch:
    def __init__(self, expected: Mapping[str, tuple[int, int]]) -> None:
        self.expected = dict(expected)  # {group: (nodes, min_nodes)}; empty = no groups
        self.group_of: dict[int, str] = {}
        self.alive: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.expected)

    def observe(self, alive: Mapping[int, str | None], say: Callable[[str], None]) -> None:
        """Record the ranks alive now ({rank: group label}); report ranks that went away."""
        for rank, group in alive.items():
            if group is not None:
                self.group_of[rank] = group
        gone = self.alive - set(alive)
        self.alive = set(alive)
        if gone and self.expected:
            named = ", ".join(f"{r} ({self.group_of.get(r, '?')})" for r in sorted(gone))
            say(f"lost node(s) of rank {named}; groups now {self.text()}")

    def counts(self) -> dict[str, list[int]]:
        """{group: [nodes alive, nodes expected]}; a group only grown into is listed too."""
        out = {name: [0, nodes] for name, (nodes, _least) in self.expected.items()}
        for rank in self.alive:
            name = self.group_of.get(rank)
            if name is not None:
                out.setdefault(name, [0, 0])[0] += 1
        return out

    def complete(self) -> bool:
        counts = self.counts()
        return all(counts[g][0] >= nodes for g, (nodes, _least) in self.expected.items())

    def at_least_min(self) -> bool:
        counts = self.counts()
        return all(counts[g][0] >= least for g, (_nodes, least) in self.expected.items())

    def short_of_min(self) -> str:
        counts = self.counts()
        return ", ".join(
            f"{g} {counts[g][0]}/{nodes} (min {least})"
            for g, (nodes, least) in self.expected.items()
            if counts[g][0] < least
        )

    def text(self) -> str:
        return ", ".join(f"{g} {j}/{n}" for g, (j, n) in self.counts().items())
