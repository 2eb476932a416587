"""A work dir a launcher packed and stored in the rendezvous by its sha256 (``submit``,
and ``deploy --run`` on a target whose machines do not share the launcher's files):
fetched, checked against its digest and unpacked with the archive rules of
:func:`syndeo.core.archive.safe_extract` -- never trusted as it is.
"""

from __future__ import annotations

import hashlib
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from syndeo.core.archive import safe_extract
from syndeo.core.errors import BlobTooLarge, WorkloadError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.core.poll import Poller
from syndeo.rendezvous import PayloadRefused, Rendezvous
from syndeo.rendezvous.base import MAX_JOB_ARCHIVE

# Unpacked, a work dir may be this much larger than its archive (the cap is on both).
MAX_UNPACKED = 4 * MAX_JOB_ARCHIVE


def unpack(archive: bytes | None, digest: str, dest: Path) -> str | None:
    """``archive`` unpacked into ``dest`` if it is the one of ``digest``; why not, if not."""
    if archive is None or hashlib.sha256(archive).hexdigest() != digest:
        return "its work dir is missing or does not match its digest"
    try:
        safe_extract(archive, dest, MAX_UNPACKED)
    except (ValueError, tarfile.TarError) as exc:
        return f"its work dir cannot be unpacked: {exc}"
    return None


def await_blob(
    get: Callable[[str], bytes | None], digest: str, s: NodeSettings, what: str, poller: Poller
) -> bytes | None:
    """The blob ``get(digest)`` returns once the launcher stored it (on a cloud: after the
    apply that made the bucket), waited for up to the join timeout; None if it is there
    but is not the one of ``digest`` (never used).  ``what`` names it in errors."""

    def fetch() -> bytes | None:
        try:
            return get(digest)
        except BlobTooLarge as exc:  # never usable: waiting would not help
            raise WorkloadError(f"{what} is too large: {exc}", exit_code=2) from None
        except PayloadRefused as exc:  # not this launch's (or no key): nor would it
            raise WorkloadError(f"{what} cannot be used: {exc}", exit_code=2) from None

    def why() -> str:
        return (
            f"{what} (sha256 {digest[:12]}…) did not reach {s.rendezvous} "
            f"within {s.join_timeout:.0f} s"
        )

    data = poller.wait(fetch, time.monotonic() + s.join_timeout, why)
    return data if hashlib.sha256(data).hexdigest() == digest else None


def for_run(rdv: Rendezvous, s: NodeSettings) -> Path:
    """The head's copy of the workload's work dir (``SYNDEO_WORKDIR_DIGEST``), below its
    scratch.  The launcher stores it once the store exists (on a cloud: after the apply
    that made the bucket), so it is waited for, up to the join timeout."""
    assert s.workdir_digest is not None
    digest = s.workdir_digest
    archive = await_blob(rdv.get_workdir, digest, s, "the workload's work dir", rdv.poller)
    dest = s.scratch / "work"
    dest.mkdir(mode=0o700, exist_ok=True)
    failed = unpack(archive, digest, dest)
    if failed:
        raise WorkloadError(f"the workload cannot start: {failed}", exit_code=2)
    return dest
