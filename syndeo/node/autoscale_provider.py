"""Ray's autoscaler's node provider for a Syndeo cluster; runs inside Ray's monitor on
the head (``provider.type: external`` in the config :mod:`syndeo.node.autoscale` writes).

A :class:`BatchingNodeProvider` (Ray's interface for outside cluster managers): once per
autoscaler update :meth:`get_node_data` says which nodes exist, and
:meth:`submit_scale_request` takes how many each group should have and which nodes to
let go.  The nodes are Ray's own (the GCS, by the ``syndeo-rank``/``syndeo-group`` labels
each node starts with) plus, per group, placeholders for the nodes asked for and not yet
joined.  A request goes to a file in the head's scratch, nowhere else: the node runtime
signs it into the status, and the launcher's watcher starts or stops the machines.

Ray's rules for this interface (its docstrings): a node named in ``workers_to_delete``
is absent from :meth:`get_node_data` as soon as :meth:`submit_scale_request` returns
(kept in ``_releasing`` until Ray sees it gone); ``status`` is "up-to-date" exactly for
running nodes.

Ray's v1 autoscaler drains a node it let go with ``drain_nodes``, which no node refuses,
after deciding from the load the raylets last reported that the node is idle: a task
that lands in between dies with the node.  :func:`guard_v1_drain` puts the drain a busy
node refuses (``DRAIN_NODE_REASON_IDLE_TERMINATION``, what autoscaler v2 uses) in its
place for this provider's nodes; a node that refuses stays, and is not let go.

Ray's v1 autoscaler never lowers its count for a node that has not come: a placeholder
would stay, and the watcher would keep its queued job, after the work that asked for it
is gone.  So a group's request drops to the nodes of it that run (never below its
``min_nodes``) while nothing that waits for resources in Ray's cluster state (a pending
request, a placement group's bundle, a ``request_resources`` constraint) would fit on
one of its nodes, and the watcher cancels the newest not joined.  Work that still waits
for another group's resources (a GPU) does not keep a CPU group's queued node.

A group whose nodes the watcher cannot start now (its starts refused, or its nodes given
up: the watcher's signed word, :func:`syndeo.node.autoscale.take_unavailable`) is asked
for no more until then: its placeholders go, its request drops to what runs, and
:func:`utilization_scorer` (the scorer Ray's scheduler loads, set in the head's
environment) scores none of its nodes, so Ray plans the waiting work onto another group
that could take it -- Ray's own scorer knows nothing of availability.  When the time
passes, Ray may ask for the group again.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ray.autoscaler.batching_node_provider import (
    BatchingNodeProvider,
    NodeData,
    ScaleRequest,
)
from ray.autoscaler.tags import NODE_KIND_HEAD, NODE_KIND_WORKER

from syndeo.node.autoscale import (
    HEAD_TYPE,
    Off,
    idle_drain_path,
    read_unavailable,
    read_want,
    unavailable_path,
    write_idle_drains,
    write_want,
)

logger = logging.getLogger(__name__)
GCS_TIMEOUT_S = 10
WAITING = "waiting-for-syndeo"  # a placeholder's status: asked for, not joined yet
# The groups that cannot start nodes now, as of the provider's latest update: the
# scorer Ray's scheduler calls is a plain function in the same process (Ray's monitor).
UNAVAILABLE: dict[str, Off] = {}


def utilization_scorer(
    node_resources: Any,
    resources: Any,
    node_type: str,
    *,
    node_availability_summary: Any,
) -> Any:
    """Ray's own scorer, but no score (no node of it) for a group that cannot start nodes
    now; the head sets ``RAY_AUTOSCALER_UTILIZATION_SCORER`` to this function."""
    from ray.autoscaler._private.resource_demand_scheduler import _default_utilization_scorer

    if node_type in UNAVAILABLE:
        return None
    return _default_utilization_scorer(
        node_resources, resources, node_type, node_availability_summary=node_availability_summary
    )


class SyndeoProvider(BatchingNodeProvider):
    def __init__(self, provider_config: dict[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        self.cluster_id = str(provider_config["syndeo_cluster"])
        self.want_file = Path(provider_config["syndeo_want"])
        self.temp_dir = str(provider_config["syndeo_temp_dir"])
        self.groups = set(provider_config["syndeo_groups"])
        self.least = {g: int(n) for g, n in provider_config.get("syndeo_min", {}).items()}
        # A group without its node's resources here (a config from an older syndeo) is
        # kept by any waiting work, as before.
        self.holds: dict[str, dict[str, float]] = {
            g: {k: float(v) for k, v in r.items()}
            for g, r in provider_config.get("syndeo_resources", {}).items()
        }
        saved = read_want(self.want_file) or {}  # a restarted monitor goes on from there
        self.seq = int(saved.get("seq", 0))
        self.want: dict[str, int] = {g: int(n) for g, n in saved.get("want", {}).items()}
        self.release: list[int] = [int(r) for r in saved.get("release", [])]
        self._releasing: set[str] = set()  # node ids let go that Ray still lists
        self._ranks: dict[str, int] = {}
        self._gcs: Any = None
        # Node ids whose idle drain Ray refused (busy again) in this update: not let go.
        self._kept: set[str] = set()
        self.idle_file = idle_drain_path(self.want_file.parent.parent)
        self.unavailable_file = unavailable_path(self.want_file.parent.parent)
        self.idle_drained: set[int] = set()
        guard_v1_drain()

    def _alive(self) -> dict[str, tuple[int, str | None]]:
        """{node id: (rank, group)} of this cluster's alive Ray nodes."""
        from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

        if self._gcs is None:
            from ray._private.utils import read_ray_address
            from ray._raylet import GcsClient  # type: ignore[attr-defined]

            self._gcs = GcsClient(address=read_ray_address(self.temp_dir))
        out: dict[str, tuple[int, str | None]] = {}
        for node_id, info in self._gcs.get_all_node_info(timeout=GCS_TIMEOUT_S).items():
            labels = dict(info.labels)
            if info.state != GcsNodeInfo.GcsNodeState.ALIVE:
                continue
            if labels.get("syndeo-cluster") != self.cluster_id or "syndeo-rank" not in labels:
                continue
            out[node_id.hex()] = (int(labels["syndeo-rank"]), labels.get("syndeo-group"))
        return out

    def _waiting_for(self) -> set[str] | None:
        """The groups some waiting work would fit on (Ray's own cluster state, from the
        GCS); None if that cannot be read (then every group keeps its request)."""
        from ray.autoscaler.v2.sdk import get_cluster_resource_state

        try:
            state = get_cluster_resource_state(self._gcs)
        except Exception as exc:
            logger.info(f"syndeo: cannot read Ray's pending demand: {exc}")
            return None
        bundles = [r.request.resources_bundle for r in state.pending_resource_requests]
        bundles += [
            r.resources_bundle for g in state.pending_gang_resource_requests for r in g.requests
        ]
        bundles += [
            r.request.resources_bundle
            for c in state.cluster_resource_constraints
            for r in c.resource_requests
        ]
        return {g for g in self.groups if any(self._fits(g, dict(b)) for b in bundles)}

    def _fits(self, group: str, bundle: dict[str, float]) -> bool:
        holds = self.holds.get(group)
        if holds is None:
            return True  # not known: it may
        return all(holds.get(k, 0.0) >= v for k, v in bundle.items() if v > 0)

    def _drop_unneeded(self, running: Counter[str]) -> None:
        """Lower a group's request to what runs when no waiting work fits it, or when it
        cannot start nodes now (above)."""
        # A group that cannot start nodes keeps asking only for those on their way.
        on_way = {g: off.on_way for g, off in UNAVAILABLE.items()}
        floor = {g: max(running[g] + on_way.get(g, 0), self.least.get(g, 0)) for g in self.groups}
        above = {g for g in self.groups if self.want.get(g, 0) > floor[g]}
        if not above:
            return
        waiting = self._waiting_for()
        if waiting is None:  # not known: each group that can start nodes keeps its request
            waiting = set(self.groups)
        waiting -= set(UNAVAILABLE)
        if above <= waiting:
            return
        self.want = {
            g: self.want.get(g, 0) if g in waiting else min(self.want.get(g, 0), floor[g])
            for g in sorted(self.groups)
        }
        self.seq += 1
        write_want(self.want_file, self.seq, self.want, self.release)
        logger.info(
            f"syndeo: request {self.seq}: nothing waits for {sorted(above - waiting)} or "
            f"it cannot start nodes now, want {self.want}"
        )

    def get_node_data(self) -> dict[str, NodeData]:
        alive = self._alive()
        self._releasing &= set(alive)  # gone from Ray: let go for good
        self._ranks = {nid: rank for nid, (rank, _) in alive.items()}
        data: dict[str, NodeData] = {}
        running: Counter[str] = Counter()
        for nid, (rank, group) in alive.items():
            if nid in self._releasing:
                continue
            if rank == 0:
                data[nid] = NodeData(NODE_KIND_HEAD, HEAD_TYPE, nid, "up-to-date")
            elif group is not None and group in self.groups:
                data[nid] = NodeData(NODE_KIND_WORKER, group, nid, "up-to-date")
                running[group] += 1
            # Nodes of fixed-size groups are no business of the autoscaler's.
        self._follow_unavailable()
        self._drop_unneeded(running)
        for group in sorted(self.groups):
            for i in range(self.want.get(group, 0) - running[group]):
                data[f"pending-{group}-{i}"] = NodeData(NODE_KIND_WORKER, group, None, WAITING)
        return data

    def _follow_unavailable(self) -> None:
        now = read_unavailable(self.unavailable_file, time.time())
        for group in sorted(set(now) - set(UNAVAILABLE)):
            logger.info(f"syndeo: group {group} cannot start nodes now: {now[group].why}")
        for group in sorted(set(UNAVAILABLE) - set(now)):
            logger.info(f"syndeo: group {group} can start nodes again")
        UNAVAILABLE.clear()
        UNAVAILABLE.update({g: off for g, off in now.items() if g in self.groups})

    def drain_idle(self, node_ids: list[str]) -> None:
        """Drain each of ``node_ids`` (v1 let them go as idle) the way a busy node refuses;
        one that refuses is kept (:meth:`terminate_node` leaves it), and v1 decides
        again at a later update."""
        from ray.core.generated.autoscaler_pb2 import DrainNodeReason  # type: ignore[attr-defined]

        ours = {n: self._ranks[n] for n in node_ids if n in self._ranks}
        if not ours:
            return
        # Said before the drain: the head sees the node draining at once, and a drain
        # it cannot account for is a spot notice.
        write_idle_drains(self.idle_file, [*self.idle_drained, *ours.values()])
        idle = DrainNodeReason.Value("DRAIN_NODE_REASON_IDLE_TERMINATION")
        for node_id, rank in ours.items():
            try:
                accepted, why = self._gcs.drain_node(node_id, idle, IDLE_MESSAGE, 0)
            except Exception as exc:  # not drained: kept, and asked again when idle
                accepted, why = False, f"{type(exc).__name__}: {exc}"
            if accepted:
                self.idle_drained.add(rank)
            else:
                self._kept.add(node_id)
                logger.info(f"syndeo: rank {rank} not let go: {why}")
        write_idle_drains(self.idle_file, list(self.idle_drained))

    def terminate_node(self, node_id: str) -> Any:
        if node_id in self._kept:  # busy again: Ray refused its idle drain
            self._kept.discard(node_id)
            return None
        return super().terminate_node(node_id)

    def submit_scale_request(self, scale_request: ScaleRequest) -> None:
        let_go = [n for n in scale_request.workers_to_delete if n in self._ranks]
        self._releasing |= set(let_go)
        self.release = sorted({*self.release, *(self._ranks[n] for n in let_go)})
        self.want = {
            g: int(scale_request.desired_num_workers.get(g, 0)) for g in sorted(self.groups)
        }
        self.seq += 1
        write_want(self.want_file, self.seq, self.want, self.release)
        logger.info(f"syndeo: request {self.seq}: want {self.want}, let go ranks {let_go}")


# The reason message of the idle drain (Ray keeps it in the node's death info).
IDLE_MESSAGE = "Terminated by autoscaler: idle (syndeo)."
_V1_DRAIN: Any = None


def _guarded_drain(autoscaler: Any, node_ids: list[str]) -> None:
    """In place of ``StandardAutoscaler.drain_nodes_via_gcs``: this provider's nodes get
    the drain a busy node refuses; any other provider, Ray's own."""
    if isinstance(autoscaler.provider, SyndeoProvider):
        autoscaler.provider.drain_idle(list(node_ids))
    else:
        _V1_DRAIN(autoscaler, node_ids)


def guard_v1_drain() -> None:
    """Put :func:`_guarded_drain` in place of v1's drain, once per process (Ray's
    monitor, which builds this provider before its first update).  v1 calls its drain
    right before the provider's ``terminate_nodes``, and nothing else calls it."""
    global _V1_DRAIN
    from ray.autoscaler._private.autoscaler import StandardAutoscaler

    if StandardAutoscaler.drain_nodes_via_gcs is not _guarded_drain:
        _V1_DRAIN = StandardAutoscaler.drain_nodes_via_gcs
        StandardAutoscaler.drain_nodes_via_gcs = _guarded_drain  # type: ignore[method-assign,assignment]
