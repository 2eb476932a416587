"""The rendezvous: how nodes that share nothing but a location find the head.

A backend implements five primitives on byte blobs addressed by a relative key
(``_create``, ``_write``, ``_read``, ``_list``, ``_delete_prefix``).  Everything
with meaning -- scoping by cluster id and attempt, freshness checks, deadlines,
adaptive polling -- lives here once, so every backend has the same guarantees.

Key layout below ``<location>/<cluster_id>/``: ``claim.json``, taken by the one
launcher that owns the id (atomic create, before anything starts; removed by
``cleanup(all_attempts=True)``), ``tls/bundle``, the cluster's CA sealed with the launch
key (syndeo/core/tls.py; only with ``--tls``: written by the launcher, for every attempt,
removed with the claim), ``creds/gcs``, the nodes' latest downscoped GCS token sealed
with the launch key (syndeo/rendezvous/gstoken.py; only for Slurm/ssh nodes of a gs://
rendezvous: replaced by the launcher while the cluster lives, removed with the claim),
and per attempt below ``a<attempt>/``::

    head.json            published once by rank 0 (atomic create: one winner)
    secret/token         the Ray auth token, sealed with the launch key (owner-only)
    logs/rank-N          the last words of a node that failed (error, Ray log tail)
    nodes/<rank>.json    one per node, written when its raylet has joined
    interrupted/<rank>.json  a spot/preemption notice a node saw (cloud, when, deadline);
                         the head reads it once, when Ray shows that node draining
    status.json          progress published by the head (replaced in place)
    result.json          the workload's result (replaced atomically)
    done.json            final exit status, written by the head at teardown
    output/<seq>         what the workload printed, in chunks, as it ran
    ctl/stop             a request from the launcher to tear the cluster down
    ctl/job-<id>         a doorbell: a job was submitted (``up`` clusters)
    ctl/cancel-<id>      a request to cancel a job (signed with the launch key)
    ctl/unavailable-<seq>  the groups the watcher cannot start nodes of now, and for how
                         long (signed with the launch key; the newest seq counts)
    jobs/<id>/spec.json  a submitted job (created once by ``submit``; signed)
    jobs/<id>/claim      taken by the head's job agent (atomic create: runs once)
    jobs/<id>/state.json pending | running | succeeded | failed | cancelled | rejected
    jobs/<id>/log/<seq>  the job's output, in chunks
    jobs/<id>/outputs.tar.gz  the files the job left in its outputs/ directory
    workdirs/<sha256>    a submitted working directory (.tar.gz), by content
    wheelhouses/<sha256> the workload's extra packages as wheels (.tar.gz), by content
    pylibs/wanted.json   the wheelhouses the head's jobs need on every node (head-signed)
    pylibs/ready-<rank>.json  the wheelhouses installed on that rank's node

Payloads -- ``logs/``, ``result.json``, ``output/``, ``jobs/<id>/log/``,
``jobs/<id>/outputs.tar.gz``, ``workdirs/``, ``wheelhouses/`` -- are sealed with the
launch key (:func:`syndeo.core.sealed.seal_payload`: a purpose per kind, the cluster id
and the blob's key as associated data) by every ``put`` and opened, authenticated, by
every ``get``: another cluster's nodes that can read the prefix learn nothing from them,
and a blob someone planted, changed or moved (to another job, chunk number or attempt)
is refused, never shown or unpacked.  A rendezvous opened without a launch key stores
and hands out no payload (:class:`PayloadRefused`).

The head reads the whole ``ctl/`` prefix with one list request per poll: the stop flag,
new jobs and cancellations cost no more than the stop flag alone did.

Attempts scope a requeued Slurm job (``SLURM_RESTART_COUNT``): records of
attempt 0 are never read by attempt 1, so stale head addresses cannot be used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from syndeo.core import launchkey, sealed
from syndeo.core.errors import BlobTooLarge, RendezvousError, SyndeoError
from syndeo.core.nodeconfig import CLUSTER_ID_RE
from syndeo.core.poll import Poller

# Clock skew we tolerate between the machine that launched a cluster and its head.
CLOCK_SKEW_S = 120.0

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class HeadRecord(_Record):
    cluster_id: str
    attempt: int
    ip: str
    gcs_port: int
    dashboard_port: int | None = None
    ray_version: str
    syndeo_version: str
    nonce: str
    created_at: float
    hostname: str
    # HMAC-SHA256 by the launch key of the other fields and the token (see
    # syndeo/core/launchkey.py); None from a head started without a key.
    signature: str | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.gcs_port}"


class HeadCheck(NamedTuple):
    """What :meth:`Rendezvous.check_head` found."""

    head: HeadRecord | None  # this launch's head (its signature verified), or None
    token: bytes | None  # the token published with it
    rejected: HeadRecord | None = None  # a record of this cluster that failed the check


class NodeRecord(_Record):
    cluster_id: str
    rank: int
    hostname: str
    ip: str
    pid: int
    joined_at: float


class InterruptRecord(_Record):
    """A cloud's notice that a spot/preemptible VM goes away (syndeo/node/preemption.py)."""

    rank: int
    cloud: str  # aws | gcp | azure ("" when only Ray's drain state was seen)
    action: str = ""  # what the cloud said it will do (terminate, stop, Preempt, ...)
    noticed_at: float  # epoch seconds, the node's clock
    deadline: float | None = None  # epoch seconds the VM is gone by (None: not said)


class DemandRecord(_Record):
    """What the head's autoscaler wants and since when the cluster is idle, signed by the
    head with a key derived from the launch key (``SCALE_PURPOSE``): the watcher acts on
    nothing else (syndeo/launcher/autoscale.py), so a record planted in the store can
    neither add machines nor take the cluster down."""

    cluster_id: str
    attempt: int
    seq: int = 0  # one more with every request of the autoscaler
    want: dict[str, int] = {}  # group -> nodes it should have
    release: list[int] = []  # ranks let go (every one so far: a missed read loses none)
    idle_since: float | None = None  # epoch; None: a job or a Ray task runs
    at: float
    signature: str | None = None

    def verified(self, key: str | None, cluster_id: str, attempt: int) -> bool:
        """True if ``key`` signed this record for that cluster and attempt."""
        if key is None or (self.cluster_id, self.attempt) != (cluster_id, attempt):
            return False
        return launchkey.verify_record(key, SCALE_PURPOSE, self.model_dump(mode="json"))


class _HeadSigned(_Record):
    """A record the head signs whole with a key derived from the launch key for its kind
    (``purpose``), bound to its cluster and attempt: what the launcher's watcher acts on
    (it ends, replaces, adds or removes machines on it) must be the head's own word, and
    a copy of it must not pass for another cluster's or another attempt's."""

    purpose: ClassVar[str]
    cluster_id: str = ""
    attempt: int = -1
    signature: str | None = None

    def signed(self, key: str) -> Self:
        fields = self.model_dump(mode="json", exclude={"signature"})
        return self.model_copy(
            update={"signature": launchkey.sign_record(key, self.purpose, fields)}
        )

    def verified(self, key: str | None, cluster_id: str, attempt: int) -> bool:
        """True if ``key`` signed this record for that cluster and attempt."""
        if key is None or (self.cluster_id, self.attempt) != (cluster_id, attempt):
            return False
        return launchkey.verify_record(key, self.purpose, self.model_dump(mode="json"))


class Phase(StrEnum):
    """The head's phase in its status record (on the wire: the value, a plain string)."""

    STARTING = "starting"
    WAITING = "waiting"  # for the other nodes to join
    RUNNING = "running"  # the workload (deploy)
    DONE = "done"
    FAILED = "failed"
    SERVING = "serving"  # an `up` cluster, taking jobs


ENDED = frozenset({Phase.DONE, Phase.FAILED})


class JobPhase(StrEnum):
    """A submitted job's state in its record (on the wire: the value, a plain string)."""

    PENDING = "pending"
    INSTALLING = "installing"  # its packages go to the nodes first
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


class StatusRecord(_HeadSigned):
    purpose: ClassVar[str] = "status"
    phase: Phase
    nodes_expected: int
    nodes_joined: list[int] = []
    message: str = ""
    progress: dict[str, Any] = {}
    dashboard_url: str = ""  # bound to the head's 127.0.0.1; reach it via an SSH tunnel
    updated_at: float
    # One more with every record the head publishes (never lower, even across a restart
    # of its process: it starts from the clock), so a replayed record is told apart.
    seq: int = 0
    groups: dict[str, list[int]] = {}  # node groups: {name: [joined, expected]}
    nodes_lost: list[int] = []  # ranks that joined and are gone
    # Ranks whose node got a spot notice and has no replacement joined yet.
    interrupted: list[InterruptRecord] = []
    demand: DemandRecord | None = None  # an `up` cluster's (syndeo/node/autoscale.py)


class ClaimRecord(_Record):
    cluster_id: str
    hostname: str
    pid: int
    claimed_at: float


class DoneRecord(_HeadSigned):
    purpose: ClassVar[str] = "done"
    exit_code: int
    message: str = ""
    finished_at: float
    lost_ranks: list[int] = []


class WantedRecord(_HeadSigned):
    """The wheelhouses (digests) the head's jobs need on every node of an ``up`` cluster:
    each node installs what it lacks beside its own loop, a node that joins later before
    it starts Ray.  Signed: only this launch's head decides what a node fetches."""

    purpose: ClassVar[str] = "wanted wheelhouses"
    digests: dict[str, list[str]] = {}  # by architecture
    updated_at: float


class ReadyRecord(_Record):
    """What one node has installed of the wanted wheelhouses, and why not, for each it
    could not install (the head's job agent fails that job with it)."""

    rank: int
    arch: str = "x86_64"  # the node's (``uname -m``)
    digests: list[str] = []
    failed: dict[str, str] = {}
    # What the node said of each digest it installed itself: the packages, the bytes
    # fetched and installed, the seconds (the head's agent writes it into the job's log).
    notes: dict[str, str] = {}
    free_bytes: int | None = None  # the node's scratch space left
    updated_at: float


def _counted(pieces: Iterable[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    for piece in pieces:
        if progress is not None:
            progress(len(piece))
        yield piece


# Job ids are made by `submit` (j<5 digits>-<6 hex>); anything else in a key is not ours.
JOB_ID_RE = re.compile(r"^j[0-9]{5}-[0-9a-f]{6}$")
TERMINAL = (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED, JobPhase.REJECTED)
MAX_JOB_ARCHIVE = 100 * 1024 * 1024  # a submitted work dir, packed (the launcher refuses more)
MAX_WHEELHOUSE = 256 * 1024 * 1024  # the workload's wheels, packed (the launcher refuses more)
MAX_OUTPUTS = 256 * 1024 * 1024  # what a job leaves in outputs/ (the agent uploads no more)
MAX_OUTPUT_CHUNK = 256 * 1024  # one chunk of a program's output (syndeo/node/output_stream.py)
MAX_LOG_CHARS = 4000  # a node's last words
# What a launch key signs for the head besides its record (syndeo/core/launchkey.py).
JOB_PURPOSE, CANCEL_PURPOSE, SCALE_PURPOSE = "job", "cancel", "scale"
UNAVAILABLE_PURPOSE = "unavailable"
TOKEN_PURPOSE = b"syndeo ray token v1"
# The payloads' purposes (HKDF info): a key made for one kind never opens another kind.
WORKDIR_PURPOSE = b"syndeo payload workdir v1"
WHEELHOUSE_PURPOSE = b"syndeo payload wheelhouse v1"
OUTPUT_PURPOSE = b"syndeo payload output v1"
JOB_OUTPUT_PURPOSE = b"syndeo payload job output v1"
JOB_OUTPUTS_PURPOSE = b"syndeo payload job outputs v1"
RESULT_PURPOSE = b"syndeo payload result v1"
LOG_PURPOSE = b"syndeo payload node log v1"
NO_PAYLOAD_KEY = (
    "no launch key to seal or open it with (the store holds payloads only sealed): a "
    "cluster an older syndeo started has none, `syndeo down` it and start it again; a node "
    "started by hand needs SYNDEO_LAUNCH_KEY"
)


class PayloadRefused(SyndeoError):
    """A payload not stored or not handed out: this rendezvous has no launch key, or the
    blob in the store is not this launch's (planted, changed, moved, another key's)."""


class JobSpec(_Record):
    job_id: str
    cluster_id: str
    attempt: int
    command: list[str]
    env: dict[str, str] = {}
    workdir_digest: str | None = None
    # The job's extra packages (``submit --requirements``): wheels stored by digest
    # below ``wheelhouses/``, installed by the head's agent and handed to Ray for the job.
    wheelhouse_digest: str | None = None
    # One wheelhouse per architecture of the cluster's groups (x86_64, aarch64): each
    # node installs its own; ``wheelhouse_digest`` is the first of them.
    wheelhouses: dict[str, str] = {}
    submitted_at: float
    submitted_by: str = ""
    # launchkey.sign_record(key, JOB_PURPOSE, the other fields) by the launcher that
    # holds the cluster's launch key: the head's agent runs nothing else.
    signature: str | None = None

    def signed(self, key: str) -> JobSpec:
        fields = self.model_dump(mode="json", exclude={"signature"})
        signature = launchkey.sign_record(key, JOB_PURPOSE, fields)
        return self.model_copy(update={"signature": signature})


class CancelRequest(_Record):
    """The body of ``ctl/cancel-<id>``: which job, of which cluster and attempt, signed."""

    job_id: str
    cluster_id: str
    attempt: int
    signature: str | None = None


class JobState(_Record):
    job_id: str
    state: JobPhase
    message: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    log_bytes: int = 0
    outputs: bool = False


class GroupUnavailable(_Record):
    """A group the watcher cannot start nodes of now: for ``for_s`` more seconds (None:
    until the watcher starts again, a permanent refusal), why, and how many of its
    nodes are still on their way (started before, not joined yet: they may come)."""

    for_s: float | None
    why: str
    on_way: int = Field(default=0, ge=0)


class Unavailable(_Record):
    """The body of ``ctl/unavailable-<seq>``: every group unavailable as of ``seq`` (an
    empty map: all are available again), of which cluster and attempt, signed."""

    cluster_id: str
    attempt: int
    seq: int
    groups: dict[str, GroupUnavailable]
    signature: str | None = None


class Control(_Record):
    """What the launcher asked of the head, from one list of ``ctl/``."""

    stop: bool = False
    jobs: list[str] = []
    cancels: list[str] = []
    unavailable: int | None = None  # the newest ``ctl/unavailable-<seq>``


class Rendezvous(ABC):
    """Base class of all rendezvous backends; subclasses set ``scheme``."""

    scheme: ClassVar[str]
    # Environment variables this backend reads (credentials, endpoints).  Launchers
    # forward exactly these into containers started with --cleanenv.
    env_passthrough: ClassVar[tuple[str, ...]] = ()
    # Of those, the ones that are (or lead to) credentials: the node keeps them to itself,
    # Ray's processes and the workload start without them (rendezvous.without_secrets).
    env_secrets: ClassVar[tuple[str, ...]] = ()
    # The largest object the store takes in one write as this backend makes it (None: no
    # limit but the space where it lands); a larger wheelhouse is refused before upload.
    max_object: ClassVar[int | None] = None

    def __init__(self, uri: str, cluster_id: str, attempt: int = 0) -> None:
        if not CLUSTER_ID_RE.match(cluster_id):
            raise RendezvousError(
                f"invalid cluster id {cluster_id!r}: use 1-40 of a-z, 0-9 and '-', "
                "starting with a letter or digit"
            )
        if attempt < 0:
            raise RendezvousError(f"invalid attempt {attempt}: must be >= 0")
        self.uri = uri
        self.cluster_id = cluster_id
        self.attempt = attempt
        self.poller = Poller()
        # The cluster's launch key: payloads are sealed with it (see the module's doc).
        self.launch_key: str | None = None

    # ------------------------------------------------------------------ primitives
    # Keys passed to primitives are relative to the cluster scope, e.g. "a0/head.json".

    @abstractmethod
    def _create(self, key: str, data: bytes) -> bool:
        """Atomically create ``key``; False (and no change) if it already exists."""

    @abstractmethod
    def _write(self, key: str, data: bytes) -> None:
        """Create or replace ``key``; readers see the old or the new blob, never a mix."""

    @abstractmethod
    def _read(self, key: str, limit: int | None = None) -> bytes | None:
        """The blob at ``key``, or None if absent.

        With ``limit``: :class:`BlobTooLarge` for a blob of more bytes, found without
        reading more than ``limit + 1`` of them (a blob anyone who can write the prefix
        may have put there is never taken into memory whole before its size is known).
        """

    @abstractmethod
    def _list(self, prefix: str) -> list[str]:
        """All keys that start with ``prefix`` (relative, full keys)."""

    @abstractmethod
    def _delete_prefix(self, prefix: str) -> None:
        """Delete every key that starts with ``prefix`` ("" = the whole cluster scope)."""

    def _create_stream(self, key: str, pieces: Iterable[bytes]) -> bool:
        """:meth:`_create` of the bytes ``pieces`` yield; backends that can write a stream
        without holding it whole override this."""
        return self._create(key, b"".join(pieces))

    def _read_stream(self, key: str) -> Iterator[bytes] | None:
        """The bytes at ``key`` piece by piece (None: absent); backends that can read a
        stream without holding it whole override this."""
        data = self._read(key)
        return None if data is None else iter([data])

    def check(self) -> None:  # noqa: B027 - optional hook, default is a no-op
        """Fail fast with a clear message if the location is unusable (override)."""

    # ------------------------------------------------------------------ helpers
    def _too_large(self, key: str, limit: int) -> BlobTooLarge:
        return BlobTooLarge(f"{self.uri}: {key} holds more than {limit >> 20} MiB: not read")

    def _key(self, name: str) -> str:
        return f"a{self.attempt}/{name}"

    def _read_model(self, key: str, model: type[M]) -> M | None:
        raw = self._read(key)
        if raw is None:
            return None
        try:
            return model.model_validate(json.loads(raw))
        except (ValueError, ValidationError):
            # A foreign or corrupt blob is treated as absent: it can never be ours.
            return None

    @staticmethod
    def _dump(record: BaseModel) -> bytes:
        return record.model_dump_json().encode()

    def _write_signed(self, key: str, record: BaseModel, purpose: str, launch_key: str) -> None:
        """``record`` at ``key``, signed for ``purpose`` with ``launch_key``."""
        fields = record.model_dump(mode="json", exclude={"signature"})
        signature = launchkey.sign_record(launch_key, purpose, fields)
        self._write(key, self._dump(record.model_copy(update={"signature": signature})))

    def _read_signed(
        self, key: str, model: type[M], purpose: str, launch_key: str | None, what: str
    ) -> tuple[M | None, str]:
        """The ``model`` record at ``key`` and "" if ``launch_key`` signed it for
        ``purpose``; else None and why it is not taken (its fields are the caller's to
        check against what it expects)."""
        try:
            fields = json.loads(self._read(key) or b"null")
            record = model.model_validate(fields)
        except (ValueError, ValidationError):
            return None, f"it is not {what}"
        if launch_key is None:
            return record, "this node has no launch key to check its signature with"
        if not launchkey.verify_record(launch_key, purpose, fields):
            return record, "it is not signed with this launch's key"
        return record, ""

    # ------------------------------------------------------------------ sealed payloads
    def _payload_key(self, what: str) -> str:
        if self.launch_key is None:
            raise PayloadRefused(f"{what} at {self.uri}: {NO_PAYLOAD_KEY}")
        return self.launch_key

    def _seal(self, key: str, purpose: bytes, data: bytes, what: str) -> bytes:
        """``data`` sealed for the blob ``key`` (its place in the store is bound too)."""
        launch_key = self._payload_key(what)
        return sealed.seal_payload(data, launch_key, self.cluster_id, purpose, key)

    def _open(self, key: str, purpose: bytes, what: str, limit: int | None = None) -> bytes | None:
        """The plain bytes of the payload at ``key`` (None: absent); :class:`PayloadRefused`
        if it is not this launch's, :class:`BlobTooLarge` past ``limit`` plain bytes."""
        launch_key = self._payload_key(what)
        cap = None if limit is None else sealed.sealed_size(limit, purpose)
        blob = self._read(key, cap)
        if blob is None:
            return None
        try:
            return sealed.open_payload(blob, launch_key, self.cluster_id, purpose, key)
        except sealed.Rejected as exc:
            raise PayloadRefused(
                f"{what} in {self.uri} is refused, not used: {exc} (not written there by "
                "this cluster, which holds its launch key)"
            ) from None

    # ------------------------------------------------------------------ the cluster id
    def claim(self, record: ClaimRecord) -> None:
        """Take the cluster id for one launcher, atomically, before anything is launched.

        Two launchers given the same id race here, not later at ``publish_head``
        (by then both have started nodes and the loser's workers could join the
        winner's head).  Not attempt-scoped: a requeue keeps the launcher's claim.
        """
        if record.cluster_id != self.cluster_id:
            raise RendezvousError("claim record does not belong to this cluster")
        if not self._create("claim.json", self._dump(record)):
            other = self._read_model("claim.json", ClaimRecord)
            who = f" by {other.hostname} (pid {other.pid})" if other else ""
            raise RendezvousError(
                f"cluster id {self.cluster_id!r} is already in use at {self.uri}{who}: "
                f"pick another id, or run `syndeo down --cluster-id {self.cluster_id}` "
                "if that cluster is gone"
            )

    def read_claim(self) -> ClaimRecord | None:
        return self._read_model("claim.json", ClaimRecord)

    def release_claim(self) -> None:
        """Give the id back (``cleanup(all_attempts=True)`` does this too)."""
        self._delete_prefix("claim.json")

    # ------------------------------------------------------------------ head
    def publish_head(self, record: HeadRecord) -> None:
        if record.cluster_id != self.cluster_id or record.attempt != self.attempt:
            raise RendezvousError("head record does not belong to this cluster/attempt")
        if not self._create(self._key("head.json"), self._dump(record)):
            other = self._read_model(self._key("head.json"), HeadRecord)
            where = f" by {other.hostname} ({other.address})" if other else ""
            raise RendezvousError(
                f"cluster {self.cluster_id!r} attempt {self.attempt} already has a head{where}; "
                "use a new cluster id or clean up the rendezvous"
            )

    def read_head(self, not_before: float | None = None) -> HeadRecord | None:
        rec = self._read_model(self._key("head.json"), HeadRecord)
        if rec is None or rec.cluster_id != self.cluster_id or rec.attempt != self.attempt:
            return None
        if not_before is not None and rec.created_at < not_before - CLOCK_SKEW_S:
            return None  # left over from an earlier launch that reused this id
        return rec

    def check_head(self, key: str | None, not_before: float | None = None) -> HeadCheck:
        """The head record of this cluster and attempt, and its token, if ``key`` signed them.

        ``key`` None (a node started by hand without a launch key): any record is taken,
        as :meth:`read_head` takes it.  A record whose signature does not verify -- none,
        another key's, or a token that is not the one it was signed with -- is returned
        as ``rejected``: someone who can write the prefix planted it.
        """
        raw = self._read(self._key("head.json"))
        if raw is None:
            return HeadCheck(None, None)
        try:
            fields = json.loads(raw)
            rec = HeadRecord.model_validate(fields)
        except (ValueError, ValidationError):
            return HeadCheck(None, None)  # a corrupt blob can never be ours
        if rec.cluster_id != self.cluster_id or rec.attempt != self.attempt:
            return HeadCheck(None, None)
        if not_before is not None and rec.created_at < not_before - CLOCK_SKEW_S:
            return HeadCheck(None, None)  # left over from an earlier launch
        # The head writes the token before its record: both are there, or it is not ours.
        blob = self.get_secret("token")
        if key is None:
            return HeadCheck(rec, blob)
        try:
            token = None if blob is None else self.open_token(blob, key)
        except sealed.Rejected:
            token = None
        # The signature covers the record as stored (every field, also ones this version
        # does not know), not as parsed.
        if token is None or not launchkey.verify(key, fields, token):
            return HeadCheck(None, None, rejected=rec)
        return HeadCheck(rec, token)

    def wait_for_own_head(
        self,
        key: str | None,
        timeout_s: float,
        not_before: float | None = None,
        on_rejected: Callable[[HeadRecord], None] | None = None,
    ) -> tuple[HeadRecord, bytes | None]:
        """Wait for :meth:`check_head` to find this launch's head; its record and token.

        A rejected record is never joined: ``on_rejected`` hears of each one once, and the
        wait goes on (the real head may still publish -- if the planted record did not
        take its place) until the timeout, whose message says what was seen.
        """
        seen: dict[str, HeadRecord] = {}

        def probe() -> tuple[HeadRecord, bytes | None] | None:
            found = self.check_head(key, not_before)
            bad = found.rejected
            if bad is not None and bad.nonce not in seen:
                seen[bad.nonce] = bad
                if on_rejected is not None:
                    on_rejected(bad)
            return None if found.head is None else (found.head, found.token)

        def why() -> str:
            msg = (
                f"no head for cluster {self.cluster_id!r} appeared at {self.uri} "
                f"within {timeout_s:.0f} s"
            )
            if not seen:
                return msg + " (is rank 0 running and pointed at the same location?)"
            bad = list(seen.values())[-1]
            return (
                f"{msg}: a head record with a bad signature was seen and ignored "
                f"({bad.address!r}, host {bad.hostname!r}): it was not published by this "
                "launch's head (someone else can write this cluster's prefix)"
            )

        return self.poller.wait(probe, time.monotonic() + timeout_s, why)

    def wait_for_head(self, timeout_s: float, not_before: float | None = None) -> HeadRecord:
        return self.poller.wait(
            lambda: self.read_head(not_before),
            time.monotonic() + timeout_s,
            lambda: (
                f"no head for cluster {self.cluster_id!r} appeared at {self.uri} "
                f"within {timeout_s:.0f} s (is rank 0 running and pointed at the same location?)"
            ),
        )

    # ------------------------------------------------------------------ secrets
    # The Ray token is sealed with the launch key (syndeo/core/sealed.py): whoever can
    # read the prefix without the key (a deployer, another cluster's nodes where their
    # identity reaches the whole bucket) cannot join the cluster or call its APIs with it.
    def publish_token(self, token: bytes, key: str | None) -> None:
        """The head's Ray token, sealed when there is a launch key (plain without one)."""
        blob = token if key is None else sealed.seal(token, key, self.cluster_id, TOKEN_PURPOSE)
        self.put_secret("token", blob)

    def open_token(self, blob: bytes, key: str) -> bytes:
        """The token in ``blob`` (raises :class:`sealed.Rejected` if not this launch's)."""
        return sealed.unseal(blob, key, self.cluster_id, TOKEN_PURPOSE)

    def put_secret(self, name: str, value: bytes) -> None:
        if not self._create(self._key(f"secret/{name}"), value):
            raise RendezvousError(f"secret {name!r} already exists for cluster {self.cluster_id!r}")

    def get_secret(self, name: str) -> bytes | None:
        return self._read(self._key(f"secret/{name}"))

    # ------------------------------------------------------------------ TLS (cluster-wide)
    # Not a per-attempt secret: the launcher writes it once per launch (before the nodes
    # start, or once a bucket made with them exists), and a restarted or requeued
    # attempt's head, which drops the earlier attempts' records, must still find it.
    def put_tls_bundle(self, blob: bytes) -> None:
        self._write("tls/bundle", blob)

    def get_tls_bundle(self) -> bytes | None:
        return self._read("tls/bundle")

    # ------------------------------------------------------------------ renewed store token
    # The nodes' latest downscoped GCS token, sealed with the launch key and replaced by
    # the launcher while the cluster lives (syndeo/rendezvous/gstoken.py): cluster-wide,
    # like the TLS bundle, and removed with the claim.
    def put_store_token(self, blob: bytes) -> None:
        self._write("creds/gcs", blob)

    def get_store_token(self) -> bytes | None:
        return self._read("creds/gcs")

    # ------------------------------------------------------------------ nodes
    def register_node(self, record: NodeRecord) -> None:
        self._write(self._key(f"nodes/{record.rank}.json"), self._dump(record))

    def list_nodes(self) -> list[NodeRecord]:
        out = []
        for key in self._list(self._key("nodes/")):
            rec = self._read_model(key, NodeRecord)
            if rec is not None and rec.cluster_id == self.cluster_id:
                out.append(rec)
        return sorted(out, key=lambda r: r.rank)

    def mark_interrupted(self, record: InterruptRecord) -> None:
        """A node's spot notice (replaced in place: a replacement may get one too)."""
        self._write(self._key(f"interrupted/{record.rank}.json"), self._dump(record))

    def read_interrupted(self, rank: int) -> InterruptRecord | None:
        rec = self._read_model(self._key(f"interrupted/{rank}.json"), InterruptRecord)
        return rec if rec is not None and rec.rank == rank else None

    # ------------------------------------------------------------------ status / results
    def publish_status(self, record: StatusRecord) -> None:
        self._write(self._key("status.json"), self._dump(record))

    def read_status(self) -> StatusRecord | None:
        return self._read_model(self._key("status.json"), StatusRecord)

    def put_log(self, rank: int, text: str) -> None:
        """A node that failed leaves its last words here (``logs/rank-N``), so the
        launcher can say why even when the machine is gone or has no shell access."""
        key = self._key(f"logs/rank-{rank}")
        data = text[-MAX_LOG_CHARS:].encode()
        self._write(key, self._seal(key, LOG_PURPOSE, data, f"the last words of rank {rank}"))

    def read_logs(self) -> dict[int, str]:
        """Every node's last words.  One that is not this launch's is left out: it would
        say a node failed (a launcher takes the head's as the end of the run)."""
        out: dict[int, str] = {}
        prefix = self._key("logs/rank-")
        self._payload_key("the nodes' last words")
        for key in self._list(prefix):
            rank = key.removeprefix(prefix)
            if not rank.isdigit():
                continue
            what = f"the last words of rank {rank}"
            with contextlib.suppress(PayloadRefused, BlobTooLarge):  # 4: UTF-8's widest
                raw = self._open(key, LOG_PURPOSE, what, 4 * MAX_LOG_CHARS)
                if raw is not None:
                    out[int(rank)] = raw.decode(errors="replace")
        return out

    def put_timeline(self, rank: int, marks: dict[str, float]) -> None:
        """Where one node's bring-up time went (see :mod:`syndeo.core.timeline`)."""
        self._write(self._key(f"timeline/rank-{rank}"), json.dumps(marks).encode())

    def read_timelines(self) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        prefix = self._key("timeline/rank-")
        for key in self._list(prefix):
            raw = self._read(key)
            with contextlib.suppress(ValueError):
                if raw is not None:
                    out[int(key.removeprefix(prefix))] = json.loads(raw)
        return out

    def put_result(self, data: bytes) -> None:
        key = self._key("result.json")
        self._write(key, self._seal(key, RESULT_PURPOSE, data, "the workload's result"))

    def get_result(self) -> bytes | None:
        """The workload's result (:class:`PayloadRefused` if not this launch's)."""
        return self._open(self._key("result.json"), RESULT_PURPOSE, "the workload's result")

    def mark_done(self, record: DoneRecord) -> None:
        self._write(self._key("done.json"), self._dump(record))

    def read_done(self) -> DoneRecord | None:
        return self._read_model(self._key("done.json"), DoneRecord)

    def request_stop(self, reason: str = "") -> None:
        self._write(self._key("ctl/stop"), reason.encode())

    def stop_requested(self) -> bool:
        return self._read(self._key("ctl/stop")) is not None

    def stop_reason(self) -> str | None:
        """Why the cluster was asked to stop (None: it was not)."""
        raw = self._read(self._key("ctl/stop"))
        return None if raw is None else raw.decode(errors="replace")

    def control(self) -> Control:
        """Stop flag, job doorbells and cancellations: one list request."""
        prefix = self._key("ctl/")
        names = [k.removeprefix(prefix) for k in self._list(prefix)]
        jobs = [n.removeprefix("job-") for n in names if n.startswith("job-")]
        cancels = [n.removeprefix("cancel-") for n in names if n.startswith("cancel-")]
        seqs = [n.removeprefix("unavailable-") for n in names if n.startswith("unavailable-")]
        return Control(
            stop="stop" in names,
            jobs=sorted(j for j in jobs if JOB_ID_RE.match(j)),
            cancels=sorted(j for j in cancels if JOB_ID_RE.match(j)),
            unavailable=max((int(n) for n in seqs if n.isdigit() and len(n) == 16), default=None),
        )

    def put_unavailable(self, groups: dict[str, GroupUnavailable], seq: int, key: str) -> None:
        """Tell the head which groups cannot start nodes now (signed with the launch key
        ``key``); the records older than ``seq`` go."""
        record = Unavailable(
            cluster_id=self.cluster_id, attempt=self.attempt, seq=seq, groups=groups
        )
        name = self._key(f"ctl/unavailable-{seq:016d}")
        self._write_signed(name, record, UNAVAILABLE_PURPOSE, key)
        for old in self._list(self._key("ctl/unavailable-")):
            if old != name:
                self._delete_prefix(old)

    def read_unavailable(self, seq: int, key: str | None) -> Unavailable | str:
        """The record ``ctl/unavailable-<seq>`` if it is signed by ``key`` for this
        cluster and attempt; else why it is not taken."""
        record, why = self._read_signed(
            self._key(f"ctl/unavailable-{seq:016d}"),
            Unavailable,
            UNAVAILABLE_PURPOSE,
            key,
            "a record of unavailable groups",
        )
        if record is None:
            return why
        if (record.cluster_id, record.seq, record.attempt) != (self.cluster_id, seq, self.attempt):
            return "it names another cluster, attempt or number"
        return why or record

    # ------------------------------------------------------------------ output
    def put_output(self, seq: int, data: bytes) -> None:
        """Chunk ``seq`` of what the workload printed (written once, in order)."""
        self._put_chunk("output/", seq, data, OUTPUT_PURPOSE, "the workload's output")

    def read_output(self, start: int, emit: Callable[[bytes], None]) -> int:
        """Emit the workload's chunks from ``start`` on that exist now; the next number."""
        return self._read_chunks("output/", start, emit, OUTPUT_PURPOSE, "the workload's output")

    def _put_chunk(self, prefix: str, seq: int, data: bytes, purpose: bytes, what: str) -> None:
        if len(data) > MAX_OUTPUT_CHUNK:
            raise ValueError(f"an output chunk holds at most {MAX_OUTPUT_CHUNK} bytes")
        key = self._key(f"{prefix}{seq:08d}")
        self._write(key, self._seal(key, purpose, data, f"{what}, chunk {seq}"))

    def _read_chunks(
        self, prefix: str, start: int, emit: Callable[[bytes], None], purpose: bytes, what: str
    ) -> int:
        """Emit the chunks from ``start`` on that exist now; the next number.  A chunk that
        is not this launch's (planted, changed, moved from another number or job) or is
        larger than any a node writes is never shown: one line says so in its place."""
        self._payload_key(what)
        seq = start
        while True:
            name = f"{what}, chunk {seq}"
            try:
                data = self._open(self._key(f"{prefix}{seq:08d}"), purpose, name, MAX_OUTPUT_CHUNK)
            except (PayloadRefused, BlobTooLarge) as exc:
                data = f"\n[syndeo: {exc}]\n".encode()
            if data is None:
                return seq
            emit(data)
            seq += 1

    # ------------------------------------------------------------------ jobs
    def put_workdir(self, digest: str, archive: bytes) -> None:
        """A submitted work dir by its sha256 (of the plain archive, which its reader
        checks); not uploaded again when already there."""
        key = self._key(f"workdirs/{digest}.tar.gz")
        if not self._list(key):
            # Another sealing of the same bytes from a racing submit: either one is fine.
            self._create(key, self._seal(key, WORKDIR_PURPOSE, archive, "the work dir"))

    def get_workdir(self, digest: str) -> bytes | None:
        """The work dir of that digest (:class:`BlobTooLarge` past ``MAX_JOB_ARCHIVE``,
        :class:`PayloadRefused` if not this launch's)."""
        key = self._key(f"workdirs/{digest}.tar.gz")
        return self._open(key, WORKDIR_PURPOSE, "the work dir", MAX_JOB_ARCHIVE)

    def put_wheelhouse(self, digest: str, archive: bytes) -> None:
        """The workload's wheels (a .tar.gz, syndeo/launcher/wheelhouse.py) by their sha256."""
        key = self._key(f"wheelhouses/{digest}.tar.gz")
        if not self._list(key):
            self._create(key, self._seal(key, WHEELHOUSE_PURPOSE, archive, "the wheels"))

    def get_wheelhouse(self, digest: str) -> bytes | None:
        """The wheelhouse of that digest (:class:`BlobTooLarge` past ``MAX_WHEELHOUSE``,
        :class:`PayloadRefused` if not this launch's)."""
        key = self._key(f"wheelhouses/{digest}.tar.gz")
        return self._open(key, WHEELHOUSE_PURPOSE, "the wheels", MAX_WHEELHOUSE)

    def put_wanted(self, record: WantedRecord) -> None:
        self._write(self._key("pylibs/wanted.json"), self._dump(record))

    def read_wanted(self, key: str | None) -> WantedRecord | None:
        """The wanted record if this launch's head signed it for this cluster and attempt."""
        rec = self._read_model(self._key("pylibs/wanted.json"), WantedRecord)
        if rec is None or not rec.verified(key, self.cluster_id, self.attempt):
            return None
        return rec

    def put_ready(self, record: ReadyRecord) -> None:
        self._write(self._key(f"pylibs/ready-{record.rank}.json"), self._dump(record))

    def read_ready(self, rank: int) -> ReadyRecord | None:
        rec = self._read_model(self._key(f"pylibs/ready-{rank}.json"), ReadyRecord)
        return rec if rec is not None and rec.rank == rank else None

    def put_wheelhouse_file(
        self, digest: str, path: Path, progress: Callable[[int], None] | None = None
    ) -> bool:
        """The wheelhouse file ``path`` (of sha256 ``digest``) sealed into the store record
        by record, never whole in memory; ``progress`` gets each sealed piece's length.
        False: already there, nothing sent."""
        key = self._key(f"wheelhouses/{digest}.tar.gz")
        if self._list(key):
            return False
        launch_key = self._payload_key("the wheels")

        def plain() -> Iterator[bytes]:
            with path.open("rb") as fh:
                while piece := fh.read(sealed.CHUNK):
                    yield piece

        out = sealed.seal_chunks(plain(), launch_key, self.cluster_id, WHEELHOUSE_PURPOSE, key)
        self._create_stream(key, _counted(out, progress))
        return True

    def get_wheelhouse_file(
        self, digest: str, dest: Path, progress: Callable[[int], None] | None = None
    ) -> bool:
        """The wheelhouse of ``digest`` opened record by record into ``dest``; False (and
        no ``dest``) if absent or not of that digest, :class:`PayloadRefused` if not
        this launch's."""
        key = self._key(f"wheelhouses/{digest}.tar.gz")
        launch_key = self._payload_key("the wheels")
        pieces = self._read_stream(key)
        if pieces is None:
            return False
        sha = hashlib.sha256()
        opened = sealed.open_chunks(
            _counted(pieces, progress), launch_key, self.cluster_id, WHEELHOUSE_PURPOSE, key
        )
        try:
            with dest.open("wb") as fh:
                for plain in opened:
                    sha.update(plain)
                    fh.write(plain)
        except sealed.Rejected as exc:
            dest.unlink(missing_ok=True)
            raise PayloadRefused(
                f"the wheels in {self.uri} are refused, not used: {exc} (not written there "
                "by this cluster, which holds its launch key)"
            ) from None
        finally:
            # A stream left half read holds its connection until collected: end it now.
            close = getattr(pieces, "close", None)
            if close is not None:
                close()
        if sha.hexdigest() != digest:
            dest.unlink(missing_ok=True)
            return False
        return True

    def submit_job(self, spec: JobSpec) -> None:
        if spec.cluster_id != self.cluster_id or spec.attempt != self.attempt:
            raise RendezvousError("job does not belong to this cluster/attempt")
        if not JOB_ID_RE.match(spec.job_id):
            raise RendezvousError(f"invalid job id {spec.job_id!r}")
        if not self._create(self._key(f"jobs/{spec.job_id}/spec.json"), self._dump(spec)):
            raise RendezvousError(f"job {spec.job_id} exists already")
        # The doorbell last: a head that sees it finds the whole spec.
        self._write(self._key(f"ctl/job-{spec.job_id}"), b"")

    def check_job_spec(self, job_id: str, key: str | None) -> tuple[JobSpec | None, str]:
        """The job record ``job_id`` if the launch key ``key`` signed it for this cluster
        and attempt; else None and why it is not taken (one line, for a log).

        Anyone who can write the prefix can put a record here; only the holder of the
        launch key can sign one.  The signature covers the record as stored (every field,
        also ones this version does not know), not as parsed.  No key: nothing is taken.
        """
        raw = self._read(self._key(f"jobs/{job_id}/spec.json"))
        if raw is None:
            return None, "no job record"
        try:
            fields = json.loads(raw)
            spec = JobSpec.model_validate(fields)
        except (ValueError, ValidationError):
            return None, "its record is not a job record"
        if spec.job_id != job_id or spec.cluster_id != self.cluster_id:
            return None, "its record names another job or cluster"
        if spec.attempt != self.attempt:
            return None, f"its record is of attempt {spec.attempt}, not {self.attempt}"
        if key is None:
            return None, "this node has no launch key to check its signature with"
        if not launchkey.verify_record(key, JOB_PURPOSE, fields):
            return None, "its record is not signed with this launch's key"
        return spec, ""

    def list_jobs(self, key: str | None) -> list[JobSpec]:
        """The jobs ``key`` signed (see :meth:`check_job_spec`); planted records are left out."""
        prefix = self._key("jobs/")
        ids = {k.removeprefix(prefix).split("/", 1)[0] for k in self._list(prefix)}
        specs = [self.check_job_spec(i, key)[0] for i in sorted(ids) if JOB_ID_RE.match(i)]
        return [s for s in specs if s is not None]

    def claim_job(self, job_id: str) -> bool:
        """True for exactly one caller: the agent that runs the job.  (A nonce: a cloud
        backend takes identical bytes for its own retried create.)"""
        return self._create(self._key(f"jobs/{job_id}/claim"), uuid.uuid4().hex.encode())

    def clear_doorbell(self, job_id: str) -> None:
        self._delete_prefix(self._key(f"ctl/job-{job_id}"))

    def put_job_state(self, state: JobState) -> None:
        self._write(self._key(f"jobs/{state.job_id}/state.json"), self._dump(state))

    def read_job_state(self, job_id: str) -> JobState | None:
        state = self._read_model(self._key(f"jobs/{job_id}/state.json"), JobState)
        return state if state is not None and state.job_id == job_id else None

    def put_job_output(self, job_id: str, seq: int, data: bytes) -> None:
        what = f"the output of job {job_id}"
        self._put_chunk(f"jobs/{job_id}/log/", seq, data, JOB_OUTPUT_PURPOSE, what)

    def read_job_output(self, job_id: str, start: int, emit: Callable[[bytes], None]) -> int:
        what = f"the output of job {job_id}"
        return self._read_chunks(f"jobs/{job_id}/log/", start, emit, JOB_OUTPUT_PURPOSE, what)

    def request_cancel(self, job_id: str, key: str) -> None:
        """Ask the head to cancel ``job_id``, signed with the launch key ``key``."""
        request = CancelRequest(job_id=job_id, cluster_id=self.cluster_id, attempt=self.attempt)
        self._write_signed(self._key(f"ctl/cancel-{job_id}"), request, CANCEL_PURPOSE, key)

    def check_cancel(self, job_id: str, key: str | None) -> str:
        """ "" if the cancel request for ``job_id`` is signed by ``key`` for this cluster and
        attempt; else why it is not taken."""
        request, why = self._read_signed(
            self._key(f"ctl/cancel-{job_id}"),
            CancelRequest,
            CANCEL_PURPOSE,
            key,
            "a cancel request",
        )
        if request is None:
            return why
        if (request.job_id, request.cluster_id) != (job_id, self.cluster_id):
            return "it names another job or cluster"
        if request.attempt != self.attempt:
            return f"it is of attempt {request.attempt}, not {self.attempt}"
        return why

    def clear_cancel(self, job_id: str) -> None:
        self._delete_prefix(self._key(f"ctl/cancel-{job_id}"))

    def put_job_outputs(self, job_id: str, archive: bytes) -> None:
        key = self._key(f"jobs/{job_id}/outputs.tar.gz")
        what = f"the outputs of job {job_id}"
        self._write(key, self._seal(key, JOB_OUTPUTS_PURPOSE, archive, what))

    def get_job_outputs(self, job_id: str) -> bytes | None:
        """The job's outputs archive (:class:`BlobTooLarge` past ``MAX_OUTPUTS``,
        :class:`PayloadRefused` if not this launch's)."""
        key = self._key(f"jobs/{job_id}/outputs.tar.gz")
        what = f"the outputs of job {job_id}"
        return self._open(key, JOB_OUTPUTS_PURPOSE, what, MAX_OUTPUTS)

    # ------------------------------------------------------------------ cleanup
    def cleanup(self, all_attempts: bool = False) -> None:
        """Remove this attempt's records (or every attempt's) from the location."""
        self._delete_prefix("" if all_attempts else f"a{self.attempt}/")

    def cleanup_earlier_attempts(self) -> None:
        """Drop records of attempts before this one (a requeued job starting clean)."""
        earlier = {
            int(m.group(1))
            for key in self._list("")
            if (m := re.match(r"^a(\d+)/", key)) and int(m.group(1)) < self.attempt
        }
        for attempt in sorted(earlier):
            self._delete_prefix(f"a{attempt}/")
