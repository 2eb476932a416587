"""The launcher's side of clusters that follow demand, run by the watcher of an ``up``
cluster: it applies what Ray's autoscaler on the head asks for, and stops an idle cluster.

The head's status carries the autoscaler's request (syndeo/node/autoscale.py), signed
with a key derived from the launch key, inside a status record the head signs whole (the
watcher takes only such records, fresh and in order: syndeo/launcher/statusgate.py, so
which nodes joined comes signed too, and no old idle record is played back).  The watcher
acts on a request only if its signature holds as well, and never beyond the bounds of the
user's own configuration (the ``min_nodes``/``max_nodes`` of each group, saved by
``up``), whatever the request says: a planted or forged record cannot make anyone pay for
more machines.  Machines come and go through the target's ``grow``/``shrink``, the path a
user's own ``grow`` takes, and a node is let go only if ``grow`` added it (a group that
follows demand starts empty, so every node of it is such a node).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from syndeo.core.clouds import POWERS_OFF
from syndeo.core.errors import ConfigError, SyndeoError
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.base import NodeState, NodeView, StartRefused, Target
from syndeo.launcher.ui import Ui
from syndeo.rendezvous import StatusRecord
from syndeo.rendezvous.base import DemandRecord, GroupUnavailable

# Tells the head which groups cannot start nodes now (a numbered, signed record).
Publish = Callable[[dict[str, GroupUnavailable], int], None]


def follows_demand(cfg: DeployConfig) -> bool:
    return cfg.layout is not None and any(g.autoscale for g in cfg.layout.groups)


def check(cfg: DeployConfig, verb: str, target: type[Target]) -> None:
    """Autoscaling and autostop settings against the verb and target, in one line each,
    before anything starts."""
    if verb != "up" and (follows_demand(cfg) or cfg.autostop_s is not None):
        raise ConfigError(
            "max_nodes and autostop are for clusters started with `up` (a deploy's cluster "
            "ends with its workload)"
        )
    if cfg.autostop_grace_s is not None and cfg.autostop_s is None:
        raise ConfigError("autostop_grace is a time after autostop: add --autostop")
    if cfg.autostop_grace_s is not None and cfg.target not in POWERS_OFF:
        raise ConfigError(
            f"autostop_grace is for VMs that can power themselves off ({', '.join(POWERS_OFF)}); "
            f"on {cfg.target} only the watcher stops an idle cluster: leave it out"
        )
    if verb == "up" and cfg.target == "slurm":
        _check_slurm_up(cfg)
    if follows_demand(cfg) and not target.can_grow():
        raise ConfigError(f"the {cfg.target} target cannot add nodes by itself: no max_nodes")
    if follows_demand(cfg) and cfg.target == "ssh":
        assert cfg.layout is not None  # follows_demand
        for g in cfg.layout.groups:
            if g.autoscale is not None and not g.ssh.get("pool"):
                raise ConfigError(
                    f"group {g.name!r}: on ssh a group that follows demand adds nodes only "
                    "on hosts you list: give it [groups.ssh] pool = [...] (at least "
                    "max_nodes hosts)"
                )


def _check_slurm_up(cfg: DeployConfig) -> None:
    """What an ``up`` cluster on Slurm cannot do with its time limit, in one line each:
    its head serves until Slurm ends the job at ``time`` (there is no workload whose end
    a requeue would continue), and a requeued head is an attempt the nodes the
    autoscaler added, each a job of its own, never join."""
    slurm = cfg.slurm or {}
    if follows_demand(cfg) and (slurm.get("requeue") or slurm.get("max_requeues")):
        raise ConfigError(
            "slurm.requeue/max_requeues and max_nodes cannot be combined: a requeued head "
            "would start an attempt that the nodes added for demand never join (drop one)"
        )
    if slurm.get("max_requeues"):
        raise ConfigError(
            "slurm.max_requeues continues a deploy's workload past its time limit; an `up` "
            "cluster is not requeued then (it serves until slurm.time): use deploy, or a "
            "longer slurm.time"
        )


# A failed start waits before the next try, twice as long after each failure in a row
# (with jitter, so that watchers do not retry in step): a transient refusal (a busy
# controller) from TRANSIENT_S, one a limit or an admin lifts (a quota, a partition
# INACTIVE) from QUOTA_S, each up to its cap.  A permanent one (a bad account) stops the
# group's starts until the watcher starts again: the same request would only fail again.
TRANSIENT_S, TRANSIENT_MAX_S = 10.0, 300.0
QUOTA_S, QUOTA_MAX_S = 60.0, 900.0


def refusal_kind(exc: SyndeoError) -> str:
    """What a failed start was: "permanent", "quota" or "transient" (StartRefused)."""
    if isinstance(exc, StartRefused):
        return exc.kind
    return "permanent" if isinstance(exc, ConfigError) else "transient"


@dataclass
class Backoff:
    """A group's failed starts in a row, and when the next may be tried."""

    failures: int = 0
    not_before: float = 0.0
    stopped: bool = False
    why: str = ""  # the last failure, in words

    def failed(self, kind: str, now: float, why: str = "") -> float:
        """Count a failure of ``kind``; the seconds until the next try (inf: none)."""
        self.failures += 1
        self.why = why
        if kind == "permanent":
            self.stopped = True
            return float("inf")
        base, cap = (QUOTA_S, QUOTA_MAX_S) if kind == "quota" else (TRANSIENT_S, TRANSIENT_MAX_S)
        wait = min(cap, base * 2.0 ** (self.failures - 1)) * random.uniform(0.75, 1.0)
        self.not_before = now + wait
        return wait

    def ready(self, now: float) -> bool:
        return not self.stopped and now >= self.not_before

    def unavailable(self, now: float, on_way: int) -> GroupUnavailable | None:
        """What the head's autoscaler is told while no start may be tried (None: one may);
        ``on_way``: the group's nodes started and not joined yet."""
        if self.ready(now):
            return None
        for_s = None if self.stopped else self.not_before - now
        return GroupUnavailable(for_s=for_s, why=self.why, on_way=on_way)


class Scaler:
    def __init__(
        self,
        target: Target,
        spec: ClusterSpec,
        autostop_s: float | None,
        ui: Ui,
        publish: Publish | None = None,
    ) -> None:
        self.target, self.spec, self.ui = target, spec, ui
        self.publish = publish
        # What the head was last told of groups that cannot start nodes (each group's
        # stop or next try, its nodes on their way), and the number of that record.  None:
        # nothing yet, so the first poll tells the head afresh -- a former watcher's word
        # (a permanent refusal, "until the watcher starts again") ends with it.
        self._told: dict[str, tuple[bool, float, int]] | None = None
        self._told_seq = 0
        self._on_way: dict[str, int] = {}  # per group: started, not joined, not going
        self.autostop_s = autostop_s
        groups = spec.layout.groups if spec.layout is not None else []
        self.bounds = {g.name: g.autoscale for g in groups if g.autoscale is not None}
        self.clocks = {g.name: (g.queue_timeout_s, g.start_timeout_s) for g in groups}
        self._refused = -1  # an unsigned record's seq, said once
        self._held: tuple[str, int] | None = None  # a request beyond bounds, said once
        self.backoff: dict[str, Backoff] = {g: Backoff() for g in self.bounds}
        # When this watcher first saw each rank in each state not joined (its clocks; a
        # restarted watcher starts them afresh, which only gives a node more time).
        self._since: dict[tuple[int, NodeState], float] = {}
        self._joined: set[int] = set()  # every rank this watcher has seen joined

    def observe(self, launched: Launched, st: StatusRecord | None) -> bool:
        """Bring each group to what the head's latest request asks (within its bounds);
        True once the cluster has been idle for ``autostop`` (the watcher then takes it
        down).  Each call compares the request with what the target sees exists (its
        :meth:`Target.observe`), so nothing is done twice: a node that ended before it
        joined, or waited past its group's clocks, is given up and started again once
        its group's :class:`Backoff` allows."""
        demand = st.demand if st is not None else None
        if st is None or demand is None:
            return False
        if not demand.verified(self.spec.launch_key, self.spec.cluster_id, self.spec.attempt):
            if demand.seq != self._refused:
                self._refused = demand.seq
                self.ui.info("a demand record not signed by this cluster's head: ignored")
            return False
        for group in self.bounds:
            self._apply(launched, group, demand, set(st.nodes_joined))
        self._tell_unavailable()
        return self._idle_for_long(demand)

    def _tell_unavailable(self) -> None:
        """Tell the head each group whose starts back off, so that Ray's autoscaler
        plans waiting work onto another group meanwhile (syndeo/node/autoscale_provider.py);
        said again whenever that changes, a failed word at the next poll."""
        now = time.monotonic()
        off = {g: b for g, b in self.backoff.items() if not b.ready(now)}
        current = {g: (b.stopped, b.not_before, self._on_way.get(g, 0)) for g, b in off.items()}
        if self.publish is None or not self.bounds or current == self._told:
            return  # (no group follows demand: nothing to tell)
        groups = {g: u for g, b in off.items() if (u := b.unavailable(now, current[g][2]))}
        seq = max(self._told_seq + 1, int(time.time() * 1000))
        try:
            self.publish(groups, seq)
        except SyndeoError as exc:
            self.ui.info(f"could not tell the head which groups cannot start nodes: {exc}")
            return
        before, self._told, self._told_seq = self._told, current, seq
        for group, u in sorted(groups.items()):
            until = "until the watcher starts again" if u.for_s is None else f"for {u.for_s:.0f} s"
            self.ui.info(f"group {group}: the head's autoscaler plans without it {until}")
        if before and not groups:
            self.ui.info("every group can start nodes again: told the head's autoscaler")

    def _idle_for_long(self, demand: DemandRecord) -> bool:
        if self.autostop_s is None or demand.idle_since is None:
            return False
        return time.time() - demand.idle_since >= self.autostop_s

    def _apply(self, launched: Launched, group: str, d: DemandRecord, joined: set[int]) -> None:
        least, most = self.bounds[group]
        asked = d.want.get(group, least)
        want = min(max(asked, least), most)
        if asked != want and self._held != (group, asked):
            self._held = (group, asked)
            self.ui.info(f"group {group}: {asked} node(s) asked, held to {least}..{most}")
        try:
            views = self.target.observe(launched, group, joined)
        except SyndeoError as exc:  # asked again at the next status
            self.ui.info(f"group {group}: could not see its nodes: {exc}")
            return
        owned = launched.demand_ranks
        owned += [v.rank for v in views if v.rank not in owned]  # not for [recovery]
        if any(v.state is NodeState.JOINED and (v.rank, v.state) not in self._since for v in views):
            self.backoff[group].failures = 0  # a node came: the group's starts work again
        views = self._seen_joined(views)
        late = self._late(group, views)
        live = [v.rank for v in views if not v.ended]
        # An ended node the target still lists has left something (a stopped VM): removed.
        remains = {v.rank for v in views if v.ended} & set(self.target.added(launched, group))
        # A release the autoscaler named counts as one even where its node has ended by
        # itself first (a released cloud VM powers off): not a failure.
        named = {r for r in d.release if r in live or r in remains}
        staying = [r for r in live if r not in named and r not in late]
        # More than wanted without naming which (asked for, no longer needed): the
        # newest not joined yet go; a joined node goes only when the autoscaler names it.
        unjoined = [r for r in sorted(staying, reverse=True) if r not in joined]
        surplus = unjoined[: max(0, len(staying) - want)]
        going = named | set(late) | set(surplus) | remains
        self._on_way[group] = len(unjoined) - len(surplus)
        try:
            stopped = self.target.shrink(launched, group, ranks=going) if going else []
            if stopped and (named or surplus):
                self.ui.info(f"group {group}: let go {', '.join(stopped)} (Ray's autoscaler)")
        except SyndeoError as exc:  # tried again at the next status
            self.ui.info(f"group {group}: could not follow demand: {exc}")
            return
        self._left_first(group, views, d, remains)
        self._ended(group, [v for v in views if v.rank not in d.release], late)
        self._add(launched, group, want - (len(staying) - len(surplus)))

    def _left_first(
        self, group: str, views: list[NodeView], d: DemandRecord, remains: set[int]
    ) -> None:
        """Say each node the autoscaler named that left before this poll could let it go.
        A released node drains and leaves by itself; a watcher slower than that (a busy
        launcher) sees it only ended, and a target that lists it no more once ended (a
        process, a Slurm job) reports that once: said here, or never."""
        for v in views:
            if v.ended and v.rank in d.release and v.rank not in remains:
                self.ui.info(f"group {group}: let go rank {v.rank} (Ray's autoscaler; it had left)")

    def _seen_joined(self, views: list[NodeView]) -> list[NodeView]:
        """``views`` with a FAILED rank this watcher has seen joined answered GONE: the
        head may drop a lost node from its count before the target sees it end."""
        self._joined |= {v.rank for v in views if v.state is NodeState.JOINED}
        return [
            replace(v, state=NodeState.GONE)
            if v.state is NodeState.FAILED and v.rank in self._joined
            else v
            for v in views
        ]

    def _late(self, group: str, views: list[NodeView]) -> dict[int, str]:
        """The ranks of ``group`` that waited past a clock, each with what it waited for."""
        queue_s, start_s = self.clocks[group]
        now = time.monotonic()
        seen = {(v.rank, v.state) for v in views}
        self._since = {k: t for k, t in self._since.items() if k in seen}
        late = {}
        for v in views:
            limit = {NodeState.QUEUED: queue_s, NodeState.STARTING: start_s}.get(v.state)
            since = self._since.setdefault((v.rank, v.state), now)
            if limit is not None and now - since >= limit:
                where = "in the queue" if v.state is NodeState.QUEUED else "running, not joined"
                why = f" ({v.reason})" if v.reason else ""
                late[v.rank] = f"{where} for {now - since:.0f} s{why}"
        return late

    def _ended(self, group: str, views: list[NodeView], late: dict[int, str]) -> None:
        """Say each node given up or failed before joining, and back the group off: the
        next start waits, as after a refused one."""
        for rank, why in sorted(late.items()):
            self.ui.info(f"group {group}: rank {rank} given up after {why}: cancelled")
        failed = [v for v in views if v.state is NodeState.FAILED]
        for v in views:
            if v.state is NodeState.FAILED:
                self.ui.info(f"group {group}: rank {v.rank} ended before it joined: {v.reason}")
            elif v.state is NodeState.GONE:
                self.ui.info(f"group {group}: rank {v.rank} ended ({v.reason or 'lost'})")
        if late or failed:
            # A queue that holds nodes past their clock is a limit lifted in time.
            queued = any(v.state is NodeState.QUEUED for v in views if v.rank in late)
            kind = "quota" if queued else "transient"
            first = min([*late, *(v.rank for v in failed)])
            why = late.get(first) or next(v.reason for v in failed if v.rank == first)
            what = "given up after" if first in late else "ended before it joined:"
            wait = self.backoff[group].failed(kind, time.monotonic(), f"rank {first} {what} {why}")
            self.ui.info(f"group {group}: next start in {wait:.0f} s")

    def _add(self, launched: Launched, group: str, count: int) -> None:
        # One node per call where a target's unit would hold several nodes together
        # (a Slurm job): each must be free to go on its own.
        unit = self.target.grow_unit or count
        backoff = self.backoff[group]
        while count > 0 and backoff.ready(time.monotonic()):
            try:
                started = self.target.grow(launched, group, min(unit, count))
            except SyndeoError as exc:
                self._failed(group, exc)
                return
            self.ui.info(f"group {group}: started {started} (Ray's autoscaler)")
            count -= min(unit, count)

    def _failed(self, group: str, exc: SyndeoError) -> None:
        kind = refusal_kind(exc)
        wait = self.backoff[group].failed(kind, time.monotonic(), f"start refused ({kind}): {exc}")
        if kind == "permanent":
            self.ui.info(
                f"group {group}: could not follow demand: {exc}; not tried again (a "
                "permanent refusal): fix it and start the cluster again"
            )
        else:
            self.ui.info(
                f"group {group}: could not follow demand ({kind}): {exc}; next try in {wait:.0f} s"
            )
