"""What a deployment target is: how machines appear and how node variables get set.

A target implements the same verbs everywhere -- ``script`` (dry run), ``launch``,
``poll``, ``stop`` -- plus ``default_rendezvous``.  It never starts Ray itself:
each machine it provides runs ``syndeo node`` with :meth:`ClusterSpec.node_env`.
``tests/test_targets.py`` checks that every target module keeps this shape.

A running cluster's nodes are followed like Ray's ``BatchingNodeProvider`` follows an
outside cluster manager: one call observes what exists (:meth:`Target.observe`: per rank
a :class:`NodeView`), and the launcher reconciles that with what is wanted through
``grow``/``shrink`` (syndeo/launcher/autoscale.py).  What a target can do follows from
what it implements (:meth:`Target.can_grow`, :meth:`Target.can_replace`), not from flags.
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from syndeo.core.errors import TargetError
from syndeo.launcher.config import DeployConfig
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.rendezvous.file import parse_file_uri


def new_cluster_id(target: str) -> str:
    return f"{target[:5]}-{secrets.token_hex(4)}"


# Below this (sticky, world-writable) directory every level of a scratch path is
# checked by syndeo.core.securedir.secure_dir: the path is predictable.
SCRATCH_BASE = Path("/tmp")


def short_scratch(spec: ClusterSpec, rank: int | str) -> Path:
    """A scratch dir short enough for Ray's Unix sockets, unique per user, cluster and rank.

    Keyed by rendezvous *and* cluster id: two launchers that happen to reuse an id
    with different rendezvous locations must still not share Ray temp dirs.
    """
    key = zlib.crc32(f"{spec.rendezvous}|{spec.cluster_id}".encode())
    return SCRATCH_BASE / f"syndeo-{os.getuid()}" / f"{key:08x}" / str(rank)


def rendezvous_binds(spec: ClusterSpec) -> list[Path]:
    """What a node's container must see of a file rendezvous: the cluster's own directory
    (the launcher's claim made it), never the root that holds every cluster's records."""
    if not spec.rendezvous.startswith("file:"):
        return []
    return [parse_file_uri(spec.rendezvous) / spec.cluster_id]


class StartRefused(TargetError):
    """A target refused to start nodes, with what kind of refusal it was, so that whoever
    retries (syndeo/launcher/autoscale.py) knows how: ``"permanent"`` (the same request
    will never succeed: stop and say so), ``"quota"`` (a limit or a state an admin or the
    provider lifts in time: try again after long), ``"transient"`` (soon)."""

    def __init__(self, message: str, kind: str = "transient") -> None:
        super().__init__(message)
        self.kind = kind


class NodeState(StrEnum):
    """Where one added node stands, as its target sees it (the ``joined`` half from the
    head's signed status)."""

    QUEUED = "queued"  # asked for; waits for a machine (a pending Slurm job)
    STARTING = "starting"  # its machine or process runs; its node has not joined yet
    JOINED = "joined"  # the head counts it
    GONE = "gone"  # it joined once and has ended (lost: the head says so, Ray asks again)
    FAILED = "failed"  # it ended before it ever joined (cancelled, crashed, refused)


@dataclass(frozen=True)
class NodeView:
    """One rank of a group as :meth:`Target.observe` sees it; ``reason``: why it waits or
    ended, in the target's words (Slurm's pending reason, a job's end state)."""

    rank: int
    group: str
    state: NodeState
    reason: str = ""

    @property
    def ended(self) -> bool:
        return self.state in (NodeState.GONE, NodeState.FAILED)


class Target(ABC):
    name: ClassVar[str]
    # True if the head's own output reaches the launcher through the target (a local
    # pipe, Slurm's output file): the workload's output is then not shown twice.
    shows_head_output: ClassVar[bool] = False
    # True if every machine sees the launcher's files at the same path (a local run; Slurm
    # on a shared filesystem): ``deploy --run`` then runs the workload in its work dir as
    # it is.  False: the work dir is packed into the rendezvous and the head runs the
    # workload in its copy (syndeo/node/workdir.py), which Ray ships to every node.
    shares_workdir: ClassVar[bool] = True

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.echo = echo  # where the head's output goes when a target can stream it

    @abstractmethod
    def default_rendezvous(self) -> str:
        """Where nodes meet when the user names no rendezvous."""

    def check(self, spec: ClusterSpec) -> None:
        """Every local check of ``spec`` against this target's settings (one line each),
        run before the rendezvous is touched or anything is written."""
        return None  # the config's own rules were all there is to check

    @abstractmethod
    def script(self, spec: ClusterSpec) -> str:
        """What ``launch`` would start, as a script a person can read (``--dry-run``)."""

    @abstractmethod
    def launch(self, spec: ClusterSpec, *, detach: bool = False) -> Launched:
        """Make machines appear, each running ``syndeo node`` with its settings."""

    @abstractmethod
    def poll(self, launched: Launched) -> int | None:
        """The cluster's exit status once its head has ended, else None."""

    @abstractmethod
    def stop(self, launched: Launched) -> None:
        """Stop every process/machine of this cluster (idempotent, only ours)."""

    def wait(self, launched: Launched, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, returning early if the target can see the head end."""
        time.sleep(timeout_s)

    def hurry(self) -> None:
        """The caller expects the cluster to end soon (its workload said done, ``down``
        asked it to stop): a target that spaces out its questions while nothing changes
        (Slurm) asks at its shortest interval again."""
        return None

    def describe(self, launched: Launched) -> str:
        """Where to find logs etc.; shown when something fails."""
        return ""

    def summary(self, launched: Launched) -> dict[str, Any]:
        """What deploy.json records about the machines beyond the common fields."""
        return {}

    def grow(
        self, launched: Launched, group: str, nodes: int, hosts: list[str] | None = None
    ) -> str:
        """Add ``nodes`` nodes of ``group`` that join the running head; what was started.

        ``hosts``: the machines for them, for targets that cannot find their own (ssh);
        ``grow`` refuses it for the others."""
        raise TargetError(
            f"the {self.name} target cannot grow a running cluster (local, slurm and ssh can)"
        )

    def shrink(
        self,
        launched: Launched,
        group: str,
        nodes: int | None = None,
        ranks: set[int] | None = None,
    ) -> list[str]:
        """Remove nodes of ``group`` (not the head) from the running cluster, newest first
        (``ranks``: exactly those of them that ``grow`` added); what was stopped."""
        raise TargetError(
            f"the {self.name} target cannot shrink a running cluster (local, slurm and ssh can)"
        )

    # The most nodes one ``grow`` should add for the autoscaler (syndeo/launcher/
    # autoscale.py) where more would be held together (a Slurm job); None: no limit.
    grow_unit: ClassVar[int | None] = None

    def added(self, launched: Launched, group: str) -> list[int]:
        """The ranks of ``group`` that ``grow`` added and no ``shrink`` removed yet,
        oldest first (read from the saved state: no request to any machine)."""
        raise TargetError(f"the {self.name} target cannot grow a running cluster")

    def observe(self, launched: Launched, group: str, joined: set[int]) -> list[NodeView]:
        """What exists of ``group``'s added nodes, by the target's own truth, asked in one
        batch (one ``squeue`` for all of a cluster's jobs; a local pid and its start time).

        The rules, which the launcher's reconciling relies on:

        * every rank ``grow`` added and no ``shrink`` removed is in the answer once;
        * ``joined`` (the head's signed word) decides JOINED; the target decides the rest;
        * a rank whose machine ended is answered GONE (it had joined) or FAILED (never
          joined), with why.  Where nothing of it is left (a process, a Slurm job) the
          target marks it gone in ``launched`` (which the caller saves), so the next
          call, and :meth:`added`, no longer list it.  Where something is left (a
          stopped VM and its disk) it stays in :meth:`added`, and the caller removes it
          with :meth:`shrink`;
        * no request beyond the target's paced queries; no machine is started or stopped.

        This default knows no more than the saved state: every added rank not joined is
        STARTING (only the launcher's clock can tell it never came)."""
        return [
            NodeView(r, group, NodeState.JOINED if r in joined else NodeState.STARTING)
            for r in self.added(launched, group)
        ]

    @classmethod
    def can_grow(cls) -> bool:
        """True if this target adds and removes nodes of a running cluster by itself."""
        return cls.grow is not Target.grow and cls.shrink is not Target.shrink

    @classmethod
    def can_replace(cls) -> bool:
        """True if :meth:`replace` can start a lost worker's node again."""
        return cls.replace is not Target.replace

    def replace(self, launched: Launched, spec: ClusterSpec, rank: int) -> str:
        """Start a new node for ``rank`` (a lost worker), which joins the running head;
        what was started."""
        raise TargetError(
            f"the {self.name} target cannot replace a lost node (local, ssh and the clouds can)"
        )

    def start_watcher(
        self, launched: Launched, argv: list[str], env: dict[str, str], log: Path
    ) -> dict[str, Any] | None:
        """Start the watcher of the ``up`` cluster ``launched`` (``argv`` with ``env``,
        its output appended to ``log``) as a job of the target's own, where the user
        asked for that; what :meth:`stop_watcher` needs to end it.  None (the default):
        the launcher starts it as a process beside itself."""
        return None

    def stop_watcher(self, entry: dict[str, Any]) -> None:
        """End the watcher :meth:`start_watcher` started (``entry``: what it returned),
        and return once it has ended: nothing it starts may outlive the cluster."""
        raise TargetError(f"the {self.name} target starts no watcher of its own")

    def creates_rendezvous(self, uri: str) -> bool:
        """True if ``launch`` creates the rendezvous location itself (a cloud bucket):
        then it can be checked only once the machines exist."""
        return False
