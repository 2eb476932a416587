"""``status``: every cluster this user started on this machine, as it stands now.

One row per ``$SYNDEO_HOME/clusters/<id>/launched.json``: nodes per group (now, from the
head's status record; min and max, from the layout ``up`` saved), age, state, jobs
running, how long it has been idle and when autostop takes it down, and on the clouds
what it has cost so far and costs per hour (the price catalog of ``invoke compare``).

Store requests per cluster: one read of the head's status; while the head does not say
the cluster is idle, one list of its jobs and two reads per job (its signed record, its
state); on a cloud cluster with nodes added by ``grow`` or the autoscaler, one list and
one read per node (when each joined).  Nothing else is asked of any machine: which nodes
a target added comes from the saved state (:meth:`Target.added`).  A store that cannot be
read makes its cluster "unreachable", in one line, and the next cluster is shown.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from syndeo.compare.catalog import Catalog, load_catalog
from syndeo.compare.errors import CompareError
from syndeo.core.clouds import CLOUDS
from syndeo.core.errors import SyndeoError, TargetError
from syndeo.launcher import ledger
from syndeo.launcher import watch as watcher
from syndeo.launcher.spec import ClusterSpec, Launched, StateVersionError
from syndeo.launcher.state import home, saved_store_env
from syndeo.rendezvous import JobPhase, Phase, Rendezvous, StatusRecord, open_rendezvous
from syndeo.rendezvous.base import ENDED

# The head publishes its status every few seconds: one older than this says it is silent.
SILENT_S = 30.0
NO_STATUS = "its rendezvous holds no status of its head (the store was removed?)"
_PRIMITIVES = ("_create", "_write", "_read", "_list", "_delete_prefix")


class GroupNodes(BaseModel):
    """One node group: ``now`` joined and alive (None: the status could not be read);
    ``min``/``max`` its bounds when it follows demand, else its size both."""

    name: str
    now: int | None
    min: int | None
    max: int | None
    autoscaled: bool


class ClusterStatus(BaseModel):
    """One row of ``status`` (``--json``: these keys, always all of them)."""

    cluster_id: str
    target: str
    state: str  # the head's phase (serving, starting, …), unreachable, unreadable
    error: str | None = None  # why unreachable or unreadable, one line
    started_at: float | None = None
    age_s: float | None = None
    status_age_s: float | None = None  # how old the head's latest status is
    groups: list[GroupNodes] = []
    jobs_running: int | None = None
    idle_s: float | None = None  # 0: something runs; None: not known
    idle_signed: bool | None = None  # the head's idle record verified (None: there is none)
    autostop_s: float | None = None
    autostop_in_s: float | None = None
    watcher: bool = False  # the watcher that applies autoscaling and autostop runs
    # ``up`` started a watcher and it has died while the cluster serves on (``syndeo
    # watch`` starts it again)
    watcher_dead: bool = False
    usd_so_far: float | None = None
    usd_per_h: float | None = None
    unpriced: str | None = None  # a cloud cluster without a price: why
    store_requests: int = 0


class _Seen(NamedTuple):
    """What the cluster's store said."""

    status: StatusRecord | None = None
    error: str | None = None
    jobs_running: int | None = None
    joined_at: dict[int, float] | None = None
    requests: int = 0


def clusters(cluster_id: str | None = None, now: float | None = None) -> list[ClusterStatus]:
    """Every cluster of this user on this machine (or the one named), by id."""
    root = home() / "clusters"
    if cluster_id is not None:
        paths = [root / cluster_id / "launched.json"]
        if not paths[0].is_file():
            raise TargetError(f"no cluster {cluster_id!r} is up")
    else:
        paths = sorted(root.glob("*/launched.json"))
    when = time.time() if now is None else now
    return [cluster_status(path, when) for path in paths]


def cluster_status(path: Path, now: float) -> ClusterStatus:
    """The row of the cluster saved at ``path`` (``.../clusters/<id>/launched.json``)."""
    try:
        launched = Launched.from_saved(json.loads(path.read_text()), path)
        spec = _saved_spec(launched)
    except (OSError, ValueError, StateVersionError) as exc:
        why = f"{path}: {_one_line(exc)}"
        return ClusterStatus(cluster_id=path.parent.name, target="?", state="unreadable", error=why)
    attempt = launched.attempt_or(spec.attempt if spec else 0)
    added = _added(launched, spec) if launched.target in CLOUDS else {}
    seen = _observe(launched, spec, attempt, bool(added and any(added.values())), now)
    idle_s, signed = _idle(seen.status, spec, attempt, now)
    autostop = launched.autostop_s
    left = None if autostop is None or idle_s is None else max(0.0, autostop - idle_s)
    state = _state(seen, spec, now - launched.started_at)
    error = seen.error or (NO_STATUS if state == "unreachable" else None)
    row = ClusterStatus(
        cluster_id=launched.cluster_id,
        target=launched.target,
        state=state,
        error=error,
        started_at=launched.started_at,
        age_s=_round(now - launched.started_at),
        status_age_s=_round(now - seen.status.updated_at) if seen.status else None,
        groups=_groups(spec, seen.status),
        jobs_running=seen.jobs_running,
        idle_s=_round(idle_s),
        idle_signed=signed,
        autostop_s=autostop,
        autostop_in_s=_round(left),
        watcher=watcher.alive(launched),
        watcher_dead=_watcher_dead(launched, state),
        store_requests=seen.requests,
    )
    if launched.target not in CLOUDS:
        return row
    so_far, per_h, unpriced = _cost(launched, added, seen.joined_at or {}, now)
    return row.model_copy(update={"usd_so_far": so_far, "usd_per_h": per_h, "unpriced": unpriced})


def _saved_spec(launched: Launched) -> ClusterSpec | None:
    """The spec ``up`` saved (None: a cluster saved without one, e.g. ``deploy --keep``)."""
    return launched.spec


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# ---------------------------------------------------------------------- the store
@contextlib.contextmanager
def _store_env(launched: Launched) -> Iterator[None]:
    """Where the launch found its store (names, never secrets: the settings
    ``load_launched`` restores), for this cluster's reads only: the next cluster may
    have another.  The shell's own settings win."""
    saved = saved_store_env(launched)
    added = {k: v for k, v in saved.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _count(rdv: Rendezvous, calls: list[int]) -> None:
    """Count in ``calls[0]`` the store requests made through ``rdv`` from now on (its
    five primitives: one call each is one request)."""
    for name in _PRIMITIVES:
        primitive = getattr(rdv, name)

        def counted(*args: Any, _primitive: Any = primitive, **kwargs: Any) -> Any:
            calls[0] += 1
            return _primitive(*args, **kwargs)

        setattr(rdv, name, counted)


def _observe(
    launched: Launched, spec: ClusterSpec | None, attempt: int, nodes: bool, now: float
) -> _Seen:
    """The head's status, the jobs running and (``nodes``) when each node joined."""
    calls = [0]
    try:
        with _store_env(launched):
            rdv = open_rendezvous(launched.rendezvous, launched.cluster_id, attempt)
            _count(rdv, calls)
            st = rdv.read_status()
            key = spec.launch_key if spec else None
            jobs = _jobs_running(rdv, key, st, _idle(st, spec, attempt, now)[0])
            joined = {n.rank: n.joined_at for n in rdv.list_nodes()} if nodes and st else {}
    except Exception as exc:  # any store, any client library: one line, then the next cluster
        return _Seen(error=_one_line(exc), requests=calls[0])
    return _Seen(st, None, jobs, joined, calls[0])


def _jobs_running(
    rdv: Rendezvous, key: str | None, st: StatusRecord | None, idle_s: float | None
) -> int | None:
    """Jobs in state "running" of those this launcher signed; none read when the head's
    signed record says the cluster is idle (no job runs then)."""
    if st is None or st.phase != Phase.SERVING or key is None:
        return None
    if idle_s is not None and idle_s > 0:
        return 0
    states = (rdv.read_job_state(job.job_id) for job in rdv.list_jobs(key))
    return sum(1 for s in states if s is not None and s.state == JobPhase.RUNNING)


# ---------------------------------------------------------------------- what it says
def _state(seen: _Seen, spec: ClusterSpec | None, age_s: float) -> str:
    if seen.error is not None:
        return "unreachable"
    if seen.status is None:
        # Nothing published yet: a head still booting, or a store that is gone.
        young = spec is not None and age_s < spec.join_timeout
        return "starting" if young else "unreachable"
    return seen.status.phase


def _idle(
    st: StatusRecord | None, spec: ClusterSpec | None, attempt: int, now: float
) -> tuple[float | None, bool | None]:
    """(idle for how long, 0 if busy; whether the record is signed): only a record the
    head signed with the launch key counts (anyone who can write the store can plant one)."""
    demand = st.demand if st is not None else None
    if demand is None:
        return None, None
    key = spec.launch_key if spec else None
    if spec is None or not demand.verified(key, spec.cluster_id, attempt):
        return None, False
    if demand.idle_since is None:
        return 0.0, True
    return max(0.0, now - demand.idle_since), True


def _groups(spec: ClusterSpec | None, st: StatusRecord | None) -> list[GroupNodes]:
    counts = st.groups if st is not None else {}
    if spec is None or spec.layout is None:
        size = spec.nodes if spec else None
        alive = len(set(st.nodes_joined) - set(st.nodes_lost)) if st else None
        return [GroupNodes(name="nodes", now=alive, min=size, max=size, autoscaled=False)]
    out = []
    for g in spec.layout.groups:
        least, most = g.autoscale or (g.nodes, g.nodes)
        now = counts.get(g.name, [0, 0])[0] if st is not None else None
        out.append(
            GroupNodes(name=g.name, now=now, min=least, max=most, autoscaled=bool(g.autoscale))
        )
    return out


def _watcher_dead(launched: Launched, state: str) -> bool:
    """A cluster that ``up`` gave a watcher, still there, whose watcher is gone (killed,
    crashed, its job out of time): autoscaling, autostop and replacements are off."""
    ended = state in (*ENDED, "unreadable")
    return watcher.expected(launched) and not ended and not watcher.alive(launched)


# ---------------------------------------------------------------------- cost (clouds)
@functools.cache
def _catalog() -> Catalog:
    return load_catalog()


def _added(launched: Launched, spec: ClusterSpec | None) -> dict[str, list[int]] | None:
    """Per group, the ranks ``grow`` or the autoscaler added (saved state; None: unknown)."""
    if spec is None or spec.layout is None:
        return {}
    from syndeo.launcher.config import load_config
    from syndeo.launcher.targets import get_target

    try:
        target = get_target(load_config(target=launched.target))
        return {g.name: target.added(launched, g.name) for g in spec.layout.groups}
    except SyndeoError:
        return None


def _rate(launched: Launched, instance_type: str) -> float | str:
    """The catalog's price per hour of one machine, or why there is none (never a guess)."""
    machines = launched.tf.machines
    region, spot = str(machines.get("region")), bool(machines.get("spot"))
    try:
        return _catalog().hourly(launched.target, instance_type, region, spot)
    except CompareError:
        kind = "spot price" if spot else "price"
        return f"no {kind} for {instance_type} in {region} ({launched.target}) in the catalog"


def _cost(
    launched: Launched,
    added: dict[str, list[int]] | None,
    joined_at: dict[int, float],
    now: float,
) -> tuple[float | None, float | None, str | None]:
    """(USD so far, USD per hour, why unpriced): the machines it was launched with since
    the apply began, and each node added since (its group's type) from its start request
    to its end, those let go before now too (:mod:`syndeo.launcher.ledger`)."""
    machines = launched.tf.machines
    if machines.get("api_endpoint"):
        return None, None, f"not {launched.target} itself (API at {machines['api_endpoint']})"
    if added is None:
        return None, None, "the nodes added to it are not known (its saved state)"
    groups = machines.get("groups") or [
        {"name": "", "instance_type": machines.get("instance_type"), "count": machines.get("count")}
    ]
    started = launched.tf.apply_started or launched.started_at
    so_far = per_h = 0.0
    for g in groups:
        rate = _rate(launched, str(g["instance_type"]))
        if isinstance(rate, str):
            return None, None, rate
        ranks = added.get(str(g["name"]), [])
        per_h += rate * (int(g["count"] or 0) + len(ranks))
        seconds = int(g["count"] or 0) * (now - started)
        # Added nodes from their start request to their end, gone ones too (the
        # ledger); one the ledger does not know (saved before it) from when it joined.
        seconds_added, known = ledger.node_seconds(launched, str(g["name"]), now)
        seconds += seconds_added
        seconds += sum(now - joined_at.get(r, now) for r in ranks if r not in known)
        so_far += rate * max(0.0, seconds) / 3600
    return round(so_far, 4), round(per_h, 4), None
