"""The head's side of clusters that follow demand: Ray's own autoscaler, told by Syndeo.

The head starts Ray with ``--autoscaling-config`` (:func:`write_config`), so Ray's
monitor runs its autoscaler there with a provider of ours
(:mod:`syndeo.node.autoscale_provider`), one node type per group with ``max_nodes``.
That provider starts no machine and holds no credential: it writes what the autoscaler
wants -- nodes per group, and which ranks to let go -- to a file in the head's private
scratch (:func:`want_path`).  The head's node runtime, which holds the launch key, signs
it into its status record (:func:`demand`), and the launcher's watcher, which holds the
credentials to make machines, applies it within the bounds the user configured
(syndeo/launcher/autoscale.py).

Idleness (for ``--autostop``) comes from Ray as well: every node's idle time, as its
raylet reports it to the GCS (the figure Ray's autoscaler itself uses), and nothing
waiting -- no pending task, actor, placement group or ``request_resources``, no node
asked for and not joined, and (unless ``autostop_wait_for`` says otherwise) no
connected driver.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from syndeo.core import launchkey
from syndeo.core.groups import parse_autoscaled
from syndeo.core.nodeconfig import IDLE_TIMEOUT_S, NodeSettings
from syndeo.rendezvous.base import SCALE_PURPOSE, DemandRecord, Unavailable

# The autoscaler's name for the head's node type (no group name has a dot).
HEAD_TYPE = "head.syndeo"
PROVIDER = "syndeo.node.autoscale_provider.SyndeoProvider"
# Ray's monitor loads its scheduler's scorer from this variable (Ray's
# AUTOSCALER_UTILIZATION_SCORER_KEY; a test checks the name against the installed Ray).
SCORER_ENV = "RAY_AUTOSCALER_UTILIZATION_SCORER"
SCORER = "syndeo.node.autoscale_provider.utilization_scorer"
# What Ray's cluster config schema requires for its own launcher (ssh, file sync, setup
# commands): nothing of it applies, since the provider starts no machine itself.
UNUSED: dict[str, Any] = {
    "auth": {},
    "file_mounts": {},
    "cluster_synced_files": [],
    "file_mounts_sync_continuously": False,
    "rsync_exclude": [],
    "rsync_filter": [],
    "initialization_commands": [],
    "setup_commands": [],
    "head_setup_commands": [],
    "worker_setup_commands": [],
    "head_start_ray_commands": [],
    "worker_start_ray_commands": [],
}


def want_path(scratch: Path) -> Path:
    return scratch / "autoscale" / "want.json"


def write_config(s: NodeSettings, temp_dir: Path) -> Path | None:
    """The autoscaling config for ``ray start --head``; None for a fixed-size cluster."""
    if not s.is_head or not s.autoscale:
        return None
    groups = parse_autoscaled(s.autoscale)
    types: dict[str, Any] = {
        HEAD_TYPE: {
            "resources": {"CPU": s.cpus, "GPU": s.gpus},
            "node_config": {},
            "max_workers": 0,
        }
    }
    for name, (least, most, cpus, gpus, memory_mb) in groups.items():
        resources: dict[str, int] = {"CPU": cpus, "GPU": gpus}
        if memory_mb:
            resources["memory"] = memory_mb * 2**20
        types[name] = {
            "resources": resources,
            "node_config": {},
            "min_workers": least,
            "max_workers": most,
        }
    where = want_path(s.scratch).parent
    where.mkdir(mode=0o700, exist_ok=True)
    config = {
        "cluster_name": s.cluster_id,
        "max_workers": sum(most for _, most, *_ in groups.values()),
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": (s.idle_timeout_s or IDLE_TIMEOUT_S) / 60,
        "provider": {
            "type": "external",
            "module": PROVIDER,
            # Ray's nodes share an IP where several run on one machine (local target):
            # the autoscaler then tells them apart by node id (Ray's own switch for it).
            "use_node_id_as_ip": True,
            # BatchingNodeProvider asserts all three (see its __init__).
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "foreground_node_launch": True,
            "syndeo_cluster": s.cluster_id,
            "syndeo_want": str(want_path(s.scratch)),
            "syndeo_temp_dir": str(temp_dir),
            "syndeo_groups": sorted(groups),
            "syndeo_min": {name: least for name, (least, *_) in groups.items()},
            # What one node of each group holds: which waiting work it could serve.
            "syndeo_resources": {name: types[name]["resources"] for name in groups},
        },
        "available_node_types": types,
        "head_node_type": HEAD_TYPE,
        **UNUSED,
    }
    path = where / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def _replace(path: Path, value: object) -> None:
    """``value`` as JSON in ``path``, replaced whole (a reader never sees half of it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def write_want(path: Path, seq: int, want: dict[str, int], release: list[int]) -> None:
    """What the provider asks for."""
    _replace(path, {"seq": seq, "want": want, "release": release})


# The provider's file is small (a few groups, the ranks let go); more is not one.
MAX_WANT_BYTES = 1 << 20
# Counts and ranks: non-negative, and far below what any cluster has.
MAX_COUNT = 2**31 - 1
# The last malformed content reported, per file: said once, not at every status.
_REPORTED: dict[Path, bytes] = {}


def read_want(path: Path, log: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """The provider's request, ``{"seq": int, "want": {group: int}, "release": [int]}``;
    None when there is none -- or when the file is not one: the head's scratch is
    writable by every task, and a file written there is no demand, never a crash of the
    head.  A malformed file is said once (through ``log``) until its content changes."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_WANT_BYTES + 1)
    except OSError:
        return None
    want = _parse_want(raw)
    if want is None and log is not None and _REPORTED.get(path) != raw:
        _REPORTED[path] = raw
        log(f"{path} is not a request of Ray's autoscaler (malformed): taken as no demand")
    return want


def _refuse(text: str) -> Any:
    raise ValueError(f"not an integer: {text[:20]}")


def _parse_want(raw: bytes) -> dict[str, Any] | None:
    """``raw`` as the provider writes it, checked; None if it is anything else."""
    if len(raw) > MAX_WANT_BYTES:
        return None
    try:
        # Integers only: 1e400, Infinity and NaN are refused, not made floats.
        data = json.loads(raw, parse_float=_refuse, parse_constant=_refuse)
    except (ValueError, RecursionError):  # also a number of over 4300 digits
        return None
    if not isinstance(data, dict):
        return None
    seq, want, release = data.get("seq", 0), data.get("want", {}), data.get("release", [])
    if not _count(seq) or not isinstance(want, dict) or not isinstance(release, list):
        return None
    if not all(_count(n) for n in want.values()) or not all(_count(r) for r in release):
        return None
    return {"seq": seq, "want": want, "release": release}


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_COUNT  # not a bool, not a float


def _log(s: NodeSettings) -> Callable[[str], None]:
    return lambda msg: print(
        f"[syndeo {s.cluster_id} r{s.rank}] {msg}", file=sys.stderr, flush=True
    )


def demand(s: NodeSettings, idle_since: float | None) -> DemandRecord | None:
    """The head's signed word on what its autoscaler wants and since when it is idle;
    None without a launch key (nothing unsigned is ever acted on)."""
    if s.launch_key is None:
        return None
    want = read_want(want_path(s.scratch), _log(s)) or {"seq": 0, "want": {}, "release": []}
    record = DemandRecord(
        cluster_id=s.cluster_id,
        attempt=s.attempt,
        seq=want["seq"],
        want=want["want"],
        release=sorted(want["release"]),
        idle_since=idle_since,
        at=time.time(),
    )
    fields = record.model_dump(mode="json", exclude={"signature"})
    signature = launchkey.sign_record(s.launch_key, SCALE_PURPOSE, fields)
    return record.model_copy(update={"signature": signature})


def unavailable_path(scratch: Path) -> Path:
    return scratch / "autoscale" / "unavailable.json"


def take_unavailable(s: NodeSettings, record: Unavailable, now: float) -> str:
    """Put the groups the watcher said it cannot start now, each with the time (this
    machine's clock: the watcher's may differ) until which it cannot, where the provider
    reads them; what changed, in words."""
    groups = {
        g: {
            "until": None if u.for_s is None else now + u.for_s,
            "why": u.why[:MAX_WHY],
            "on_way": min(u.on_way, MAX_COUNT),
        }
        for g, u in record.groups.items()
    }
    _replace(unavailable_path(s.scratch), groups)
    if not groups:
        return "every group can start nodes again"
    return "; ".join(
        f"group {g} cannot start nodes "
        + ("until the watcher starts again" if u.for_s is None else f"for {u.for_s:.0f} s")
        + f" ({u.why})"
        for g, u in sorted(record.groups.items())
    )


# A reason is a line of the watcher's log; more is not one.
MAX_WHY = 500


class Off(NamedTuple):
    """A group that cannot start nodes now: why, and how many of its nodes are still on
    their way (the provider keeps asking for those)."""

    why: str
    on_way: int


def read_unavailable(path: Path, now: float) -> dict[str, Off]:
    """The groups unavailable at ``now``.  A file any task could write (the head's
    scratch): anything else than the head writes is none."""
    try:
        with path.open("rb") as fh:
            data = json.loads(fh.read(MAX_WANT_BYTES))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    for group, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("why"), str):
            continue
        until, on_way = entry.get("until"), entry.get("on_way", 0)
        if not _count(on_way):
            continue
        if until is None or (isinstance(until, int | float) and until > now):
            out[str(group)] = Off(entry["why"], on_way)
    return out


def idle_drain_path(scratch: Path) -> Path:
    return scratch / "autoscale" / "idle-drains.json"


def write_idle_drains(path: Path, ranks: list[int]) -> None:
    """The ranks the provider asked Ray to drain as idle."""
    _replace(path, sorted(ranks))


def idle_drains(s: NodeSettings, groups: dict[int, str | None]) -> set[int]:
    """The ranks being drained as idle, not for a spot notice (the GCS does not say which
    drain a node is under), of those ``groups`` (rank: group) places in a group that
    follows demand.  Like the request, a file any task could write: anything but a short
    list of ranks is none, and a planted rank of a fixed-size group (whose spot notice
    starts its successor early) is never one."""
    try:
        with idle_drain_path(s.scratch).open("rb") as fh:
            data = json.loads(fh.read(MAX_WANT_BYTES), parse_float=_refuse, parse_constant=_refuse)
    except (OSError, ValueError, RecursionError):
        return set()
    if not (isinstance(data, list) and all(_count(r) for r in data)):
        return set()
    demand = set(parse_autoscaled(s.autoscale)) if s.autoscale else set()
    return {r for r in data if groups.get(r) in demand}


def released(s: NodeSettings) -> set[int]:
    """The ranks the autoscaler let go: gone on purpose, not lost."""
    want = read_want(want_path(s.scratch), _log(s))
    return set(want["release"]) if want is not None else set()


# A job in this namespace is Ray's own (the dashboard's), never a user's driver.
RAY_INTERNAL_NAMESPACE = "_ray_internal"


def busy_reason(state: Any) -> str:
    """Why Ray's resource state (``get_cluster_resource_state``) says the cluster is
    busy even where every node is idle: demand waiting for a node ("" when none).
    Waiting demand is work: the node it waits for may be queued for an hour."""
    if len(state.pending_resource_requests):
        return "tasks or actors wait for resources"
    if len(state.pending_gang_resource_requests):
        return "placement groups wait for nodes"
    if any(len(c.resource_requests) for c in state.cluster_resource_constraints):
        return "request_resources asks for nodes"
    return ""


def live_drivers(gcs: Any) -> int:
    """How many drivers (``ray.init``) are connected now: the GCS's live jobs, less Ray's
    own.  A driver between two calls is a user at work, though no task runs."""
    jobs = gcs.get_all_job_info(skip_is_running_tasks_field=True, timeout=10)
    return sum(
        1
        for job in jobs.values()
        if not job.is_dead and not job.config.ray_namespace.startswith(RAY_INTERNAL_NAMESPACE)
    )


def unjoined(s: NodeSettings, alive: dict[str, list[int]]) -> int:
    """Nodes the autoscaler asked for that have not joined (``alive``: {group: [alive,
    expected]}): a Slurm job in its queue, a VM booting -- demand that is being met."""
    if not s.autoscale:
        return 0
    want = (read_want(want_path(s.scratch)) or {}).get("want", {})
    return sum(max(0, n - alive.get(g, [0])[0]) for g, n in want.items())


def cluster_activity(gcs: Any, drivers: bool) -> tuple[float, str]:
    """How long every node of the cluster has been idle, from the idle times the raylets
    report to Ray's GCS, and why it counts as busy ("" when it does not; then 0 s means
    a task runs).  ``drivers``: a connected driver counts as busy."""
    from ray.autoscaler.v2.sdk import get_cluster_resource_state
    from ray.core.generated.autoscaler_pb2 import NodeStatus  # type: ignore[attr-defined]

    state = get_cluster_resource_state(gcs)
    why = busy_reason(state)
    if not why and drivers and (n := live_drivers(gcs)):
        why = f"{n} driver(s) connected"
    if why:
        return 0.0, why
    idle = [n.idle_duration_ms / 1000 for n in state.node_states if n.status != NodeStatus.DEAD]
    return (min(idle) if idle else 0.0), ""
