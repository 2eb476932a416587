"""An idle cloud cluster whose watcher is gone stops itself, and its VMs power off.

``up --autostop`` makes the launcher's watcher take an idle cluster down.  A watcher
that is gone (a closed laptop) takes nothing down, so on the clouds of
:data:`~syndeo.core.clouds.POWERS_OFF` the head does the watcher's part itself, later:
once the cluster has been idle for autostop plus autostop_grace (the watcher, if it
runs, has acted by then), it asks the cluster to stop through the rendezvous with
:data:`AUTOSTOP_REASON`.  Every node ends as on ``down`` and then exits with
:data:`POWEROFF_EXIT`, which the VM's unit turns into a power-off through the OS
(``ExecStopPost`` of packer/cloud/files/syndeo-node.service runs
terraform/modules/node/files/syndeo-node-stopped): no cloud API, no credentials.
``down`` later removes the powered-off VMs and everything else.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from syndeo.core.clouds import POWERS_OFF
from syndeo.core.errors import SyndeoError
from syndeo.core.nodeconfig import AUTOSTOP_GRACE_S, NodeSettings
from syndeo.rendezvous import Rendezvous

AUTOSTOP_REASON = "autostop"
# The node's exit status that asks for its VM to be powered off; syndeo-node-stopped
# tests for the same number (tests/node/test_poweroff.py keeps them equal).  Only the
# node's own decisions exit with it (:func:`exit_status`, :func:`released_status`): errors
# exit 1-3, signals 128 and up, and a workload that exits with it (75 is also the
# checkpoint status: stopped to continue later) makes the node exit
# :data:`WORKLOAD_POWEROFF_EXIT` instead.
POWEROFF_EXIT = 75
# What the node exits with when the workload's own status is POWEROFF_EXIT.  The launcher
# still reports the workload's 75: it reads the status from the head's done record, and a
# batch script that requeues a checkpointed run tests only for a failure.
WORKLOAD_POWEROFF_EXIT = 1
# How long a node keeps trying to read why the cluster stopped.  The store can be out of
# reach for a while just as the cluster stops (a busy endpoint, a network that settles as
# the head's VM goes away); a node that gave up at once would leave its VM on, billing,
# with no watcher to remove it.
STOP_READ_S = 120.0


def after_s(s: NodeSettings) -> float | None:
    """How long the head waits, idle, before it stops the cluster and its VMs power
    off; None where the nodes never do (no autostop, or not a cloud that powers off)."""
    if s.target not in POWERS_OFF or s.autostop_s is None:
        return None
    grace = AUTOSTOP_GRACE_S if s.autostop_grace_s is None else s.autostop_grace_s
    return s.autostop_s + grace


def due(s: NodeSettings, idle_since: float | None, now: float) -> bool:
    """Whether the head, idle since ``idle_since`` (epoch s; None: busy), stops now."""
    limit = after_s(s)
    return limit is not None and idle_since is not None and now - idle_since >= limit


def exit_status(s: NodeSettings, rdv: Rendezvous, code: int, log: Callable[[str], None]) -> int:
    """The node's exit status once it has left the cluster: :data:`POWEROFF_EXIT` where
    the cluster stopped itself for autostop and this node's VM powers off, else ``code``
    -- never POWEROFF_EXIT from a workload (``deploy`` passes its status on), which would
    power its VM off."""
    if code == POWEROFF_EXIT:
        log(
            f"the workload exited {code}, the status by which a node asks for its VM's "
            f"power-off: this node exits {WORKLOAD_POWEROFF_EXIT} instead"
        )
        return WORKLOAD_POWEROFF_EXIT
    if code != 0 or after_s(s) is None:
        return code
    try:
        reason = _stop_reason(rdv, log)
    except SyndeoError as exc:  # the VM stays on; `down` still removes it
        log(f"could not read why the cluster stopped ({exc}): not powering off")
        return code
    if reason != AUTOSTOP_REASON:
        return code
    log("the cluster stopped itself (autostop, no watcher): this VM powers off")
    return POWEROFF_EXIT


def _stop_reason(rdv: Rendezvous, log: Callable[[str], None]) -> str | None:
    """``rdv.stop_reason()``, retried for :data:`STOP_READ_S`; the last error raises."""

    def said(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log(f"cannot read why the cluster stopped yet ({exc}); trying again")

    retrying = Retrying(
        retry=retry_if_exception_type(SyndeoError),
        stop=stop_after_delay(STOP_READ_S),
        wait=wait_exponential(multiplier=1, min=1, max=15),
        before_sleep=said,
        reraise=True,
    )
    return retrying(rdv.stop_reason)


def released_status(s: NodeSettings) -> int:
    """The exit status of a node Ray's autoscaler let go: :data:`POWEROFF_EXIT` on the
    clouds that power off (a released VM must not bill on when no watcher removes it),
    else 0 -- a release is no failure."""
    return POWEROFF_EXIT if s.target in POWERS_OFF else 0
