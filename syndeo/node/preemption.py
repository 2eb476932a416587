"""Spot notices: a node on a spot/preemptible VM watches its cloud's notice and, on one,
asks Ray to drain it and records the interruption in the rendezvous.

Each cloud tells the VM itself, through its metadata service, shortly before it takes
the VM back:

* AWS (about 2 minutes ahead): IMDSv2 ``spot/instance-action``, 404 until a notice,
  then ``{"action": "terminate"|"stop"|"hibernate", "time": "<UTC ISO>"}``; every read
  needs a session token (``PUT /latest/api/token``);
* GCP (about 30 s): ``instance/preempted`` says ``TRUE`` once preempted (no time is
  given: the deadline is Compute Engine's 30 s); header ``Metadata-Flavor: Google``;
* Azure (at least 30 s): Scheduled Events, an event of type ``Preempt`` naming this VM
  with its ``NotBefore`` time; header ``Metadata: true``;
* Alibaba Cloud (about 5 minutes ahead): ECS metadata ``instance/spot/termination-time``,
  404 until a notice, then the UTC ISO time the instance is released; in hardened mode
  every read needs a session token (``PUT /latest/api/token``,
  :class:`syndeo.rendezvous.alicreds.EcsMetadata`).

The drain (reason preemption, with the deadline) makes Ray's scheduler place no new
work there; the record (``interrupted/<rank>.json``) tells the head -- which sees the
drain in Ray's GCS, at no cost to the store -- and through its status the launcher,
which starts the rank's replacement while this VM still runs.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from syndeo.core.errors import NodeError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.rendezvous import InterruptRecord, Rendezvous
from syndeo.rendezvous.alicreds import EcsMetadata
from syndeo.rendezvous.alicreds import MetadataError as EcsMetadataError
from syndeo.rendezvous.tolerant import retry_until

# Each cloud's metadata service, as a VM reaches it.
METADATA_URL = {
    "aws": "http://169.254.169.254",
    "gcp": "http://metadata.google.internal",
    "azure": "http://169.254.169.254",
    "alibaba": "http://100.100.100.200",
}
# AWS asks for a check every 5 s; GCP and Azure give 30 s: a few seconds of that is
# what a poll may cost.  A local metadata request costs nothing else.
POLL_S = 2.0
REQUEST_TIMEOUT_S = 2.0
# GCP says only that the VM is preempted; Compute Engine stops it 30 s later.
GCP_NOTICE_S = 30.0
AZURE_API = "2020-07-01"
AWS_TOKEN_TTL_S = 21600
GCS_TIMEOUT_S = 10.0
# The record must reach the store while the VM is still there to say it.
RECORD_DEADLINE_S = 20.0


@dataclass(frozen=True)
class Notice:
    cloud: str
    action: str
    noticed_at: float
    deadline: float | None


class MetadataError(Exception):
    """The metadata service refused or did not answer (retried at the next poll)."""


def _request(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise MetadataError(f"{url}: {getattr(exc, 'reason', exc)}") from None


class Probe:
    """One cloud's notice, asked for once per :meth:`check` (None: no notice now)."""

    def __init__(self, cloud: str, base_url: str | None = None) -> None:
        if cloud not in METADATA_URL:
            raise NodeError(f"no spot notices for cloud {cloud!r} (aws, gcp, azure or alibaba)")
        self.cloud = cloud
        self.base = (base_url or METADATA_URL[cloud]).rstrip("/")
        self._token: str | None = None
        self._token_until = 0.0
        self._vm_name: str | None = None
        self._ecs = EcsMetadata(self.base) if cloud == "alibaba" else None

    def check(self) -> Notice | None:
        if self.cloud == "aws":
            return self._aws()
        if self._ecs is not None:
            return self._alibaba(self._ecs)
        return self._gcp() if self.cloud == "gcp" else self._azure()

    # ------------------------------------------------------------------ AWS
    def _aws_token(self) -> str:
        if self._token is None or time.monotonic() >= self._token_until:
            code, body = _request(
                f"{self.base}/latest/api/token",
                {"X-aws-ec2-metadata-token-ttl-seconds": str(AWS_TOKEN_TTL_S)},
                method="PUT",
            )
            if code != 200:
                raise MetadataError(f"IMDS refused a session token (HTTP {code})")
            self._token = body.decode().strip()
            # Renewed well before EC2 would stop taking it.
            self._token_until = time.monotonic() + AWS_TOKEN_TTL_S / 2
        return self._token

    def _aws(self) -> Notice | None:
        url = f"{self.base}/latest/meta-data/spot/instance-action"
        code, body = _request(url, {"X-aws-ec2-metadata-token": self._aws_token()})
        if code == 401:  # the token expired early (IMDS restarted): a new one next time
            self._token = None
            raise MetadataError("IMDS refused the session token (HTTP 401)")
        if code == 404:
            return None
        if code != 200:
            raise MetadataError(f"spot/instance-action: HTTP {code}")
        data = _json(body)
        when = datetime.fromisoformat(str(data["time"]).replace("Z", "+00:00"))
        return Notice("aws", str(data.get("action", "")), time.time(), when.timestamp())

    # ------------------------------------------------------------------ Alibaba Cloud
    def _alibaba(self, ecs: EcsMetadata) -> Notice | None:
        try:
            code, body = ecs.get("instance/spot/termination-time")
        except EcsMetadataError as exc:
            raise MetadataError(str(exc)) from None
        if code == 404:
            return None
        if code != 200:
            raise MetadataError(f"instance/spot/termination-time: HTTP {code}")
        text = body.decode(errors="replace").strip()
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise MetadataError(f"termination-time: not a time: {text[:64]!r}") from None
        return Notice("alibaba", "terminate", time.time(), when.timestamp())

    # ------------------------------------------------------------------ GCP
    def _gcp(self) -> Notice | None:
        url = f"{self.base}/computeMetadata/v1/instance/preempted"
        code, body = _request(url, {"Metadata-Flavor": "Google"})
        if code != 200:
            raise MetadataError(f"instance/preempted: HTTP {code}")
        if body.strip().upper() != b"TRUE":
            return None
        now = time.time()
        return Notice("gcp", "preempted", now, now + GCP_NOTICE_S)

    # ------------------------------------------------------------------ Azure
    # Scheduled Events starts serving a VM on its first request, which may take a while
    # to answer: the first polls time out, are said once, and are tried again.
    def _azure(self) -> Notice | None:
        url = f"{self.base}/metadata/scheduledevents?api-version={AZURE_API}"
        code, body = _request(url, {"Metadata": "true"})
        if code != 200:
            raise MetadataError(f"scheduledevents: HTTP {code}")
        events = [e for e in _json(body).get("Events", []) if e.get("EventType") == "Preempt"]
        # Events of VMs that share an availability set or scale set with this one are
        # shown here too: only those naming this VM are ours.
        ours = [e for e in events if self._names_us(e.get("Resources") or [])]
        if not ours:
            return None
        now = time.time()
        not_before = str(ours[0].get("NotBefore") or "")
        # Empty once the event has started: the VM goes now.
        deadline = parsedate_to_datetime(not_before).timestamp() if not_before else now
        return Notice("azure", "Preempt", now, deadline)

    def _names_us(self, resources: list[str]) -> bool:
        if self._vm_name is None:
            url = f"{self.base}/metadata/instance/compute/name?api-version=2021-02-01&format=text"
            code, body = _request(url, {"Metadata": "true"})
            if code != 200:
                raise MetadataError(f"instance/compute/name: HTTP {code}")
            self._vm_name = body.decode().strip()
        return self._vm_name in resources


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise MetadataError(f"not JSON: {body[:200]!r}") from None
    if not isinstance(data, dict):
        raise MetadataError(f"not a JSON object: {body[:200]!r}")
    return data


# ---------------------------------------------------------------------- Ray's drain
def own_node_id(gcs: Any, temp_dir: Path) -> str | None:
    """This node's Ray node id: the alive node started with our ``--temp-dir`` (unique
    per node: it is in this node's own scratch dir)."""
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    want = os.path.realpath(temp_dir)
    for info in gcs.get_all_node_info(timeout=GCS_TIMEOUT_S).values():
        alive = info.state == GcsNodeInfo.GcsNodeState.ALIVE
        if alive and info.temp_dir and os.path.realpath(info.temp_dir) == want:
            return str(info.node_id.hex())
    return None


def drain(address: str, token_path: Path, temp_dir: Path, notice: Notice) -> str:
    """Ask Ray's GCS to drain this node, reason preemption, with the notice's deadline;
    the node id drained."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token_path)
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.core.generated.autoscaler_pb2 import DrainNodeReason  # type: ignore[attr-defined]

    gcs = GcsClient(address=address)
    node_id = own_node_id(gcs, temp_dir)
    if node_id is None:
        raise NodeError(f"Ray's GCS at {address} does not list this node (temp dir {temp_dir})")
    deadline_ms = int(notice.deadline * 1000) if notice.deadline is not None else 0
    accepted, why = gcs.drain_node(
        node_id,
        DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
        f"{notice.cloud} spot notice: {notice.action}",
        deadline_ms,
    )
    if not accepted:  # Ray accepts every preemption drain; said if that ever changes
        raise NodeError(f"Ray did not accept draining this node: {why}")
    return node_id


# ---------------------------------------------------------------------- the watcher
class Watcher:
    """Polls the notice in a thread; on the first one, drains and records (once)."""

    def __init__(
        self,
        s: NodeSettings,
        rdv: Rendezvous,
        on_notice: Callable[[Notice], None],
        log: Callable[[str], None],
        poll_s: float = POLL_S,
    ) -> None:
        assert s.spot_notices is not None
        base = s.metadata_url.replace("{rank}", str(s.rank)) if s.metadata_url else None
        self.probe = Probe(s.spot_notices, base)
        self.s, self.rdv, self.on_notice, self.log = s, rdv, on_notice, log
        self.poll_s = poll_s
        self.notice: Notice | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spot-notices", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=REQUEST_TIMEOUT_S + 1)

    def _run(self) -> None:
        said = ""
        while not self._stop.is_set():
            try:
                notice = self.probe.check()
            except (MetadataError, KeyError, ValueError, TypeError) as exc:
                # Said once per kind of failure, not every poll: a VM whose metadata
                # service hiccups keeps its node, and keeps watching.
                if str(exc) != said:
                    said = str(exc)
                    self.log(f"spot notices: cannot read the {self.probe.cloud} notice: {exc}")
                notice = None
            if notice is not None:
                self.notice = notice
                self._act(notice)
                return
            self._stop.wait(self.poll_s)

    def _act(self, notice: Notice) -> None:
        left = "" if notice.deadline is None else f", {notice.deadline - time.time():.0f} s left"
        self.log(f"spot notice from {notice.cloud}: {notice.action}{left}; draining this node")
        # Drain first: no new work should land here while the record is written.
        try:
            self.on_notice(notice)
        except Exception as exc:  # the record below still tells the launcher
            self.log(f"could not drain this node in Ray: {type(exc).__name__}: {exc}")
        record = InterruptRecord(
            rank=self.s.rank,
            cloud=notice.cloud,
            action=notice.action,
            noticed_at=notice.noticed_at,
            deadline=notice.deadline,
        )
        try:
            retry_until(
                lambda: self.rdv.mark_interrupted(record),
                RECORD_DEADLINE_S,
                self.log,
                "record the spot notice",
            )
        except Exception as exc:  # the head still sees the drain in Ray's GCS
            self.log(f"could not record the spot notice: {type(exc).__name__}: {exc}")
