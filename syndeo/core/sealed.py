"""Small secrets sealed for one launch's nodes: AES-256-GCM under a key derived from the
launch key (the cluster's CA for TLS, the nodes' GCS token).

Each use names its own ``purpose`` (the HKDF info): a key made for one kind of blob can
never open another kind, even of the same launch.  The cluster id is the associated
data, so a blob of another cluster, or a changed one, fails authentication.  Whoever can
write the cluster's prefix can neither read a sealed blob nor plant one the nodes take;
whoever reads a node's settings holds the launch key (as for the head record's
signature, this guards the store, not the machines).

Payloads (work dirs, wheelhouses, output, results: up to hundreds of MB) are sealed as
a *stream* (:func:`seal_chunks`, :func:`open_chunks`): a header, then the plain bytes
in records of :data:`CHUNK` bytes (the last one shorter), each its own AES-GCM message
whose associated data binds, besides the purpose and the cluster id, a ``context`` (the
blob's place in the store), the stream's random id, the record's index and whether it
is the last: records cannot be reordered, dropped, cut off at the end or moved to
another stream, and neither side ever needs more than one record in memory.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from syndeo.core.launchkey import KEY_RE

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# cryptography is imported inside the functions: a node that seals nothing never loads it.
_NONCE_LEN = 12
_TAG_LEN = 16
# A payload stream: plain bytes per record, a stream's random id, a record's overhead.
CHUNK = 1 << 20
_STREAM_ID_LEN = 16
RECORD_OVERHEAD = _NONCE_LEN + _TAG_LEN
Bytes = bytes | bytearray | memoryview
Pieces = Iterable[Bytes]


class Rejected(Exception):
    """A sealed blob that is not this launch's (another key, cluster, purpose, or tampered)."""


def _aead(launch_key: str, purpose: bytes) -> AESGCM:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    if not KEY_RE.match(launch_key):
        raise ValueError("a launch key is 64 hex digits")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose)
    return AESGCM(hkdf.derive(bytes.fromhex(launch_key)))


def seal(plain: bytes, launch_key: str, cluster_id: str, purpose: bytes) -> bytes:
    """``purpose`` | nonce | AES-GCM(plain), openable only with this launch's key."""
    nonce = secrets.token_bytes(_NONCE_LEN)
    aad = purpose + b"\0" + cluster_id.encode()
    return purpose + b"\n" + nonce + _aead(launch_key, purpose).encrypt(nonce, plain, aad)


def unseal(blob: bytes, launch_key: str, cluster_id: str, purpose: bytes) -> bytes:
    """The plain bytes of ``blob``, or :class:`Rejected` if it fails authentication."""
    from cryptography.exceptions import InvalidTag

    head = purpose + b"\n"
    if not blob.startswith(head) or len(blob) < len(head) + _NONCE_LEN + _TAG_LEN:
        raise Rejected(f"not a sealed {purpose.decode(errors='replace')} blob")
    nonce = blob[len(head) : len(head) + _NONCE_LEN]
    aad = purpose + b"\0" + cluster_id.encode()
    try:
        return _aead(launch_key, purpose).decrypt(nonce, blob[len(head) + _NONCE_LEN :], aad)
    except InvalidTag:
        raise Rejected("it fails authentication with this launch's key") from None


def _stream_head(purpose: bytes) -> bytes:
    if b"\0" in purpose or b"\n" in purpose:
        raise ValueError("a purpose holds neither NUL nor newline")
    return purpose + b"\n"


def _base(purpose: bytes, cluster_id: str, context: str, stream_id: bytes) -> bytes:
    return b"\0".join([purpose, cluster_id.encode(), context.encode(), stream_id])


def _record_aad(base: bytes, index: int, last: bool) -> bytes:
    return base + index.to_bytes(8, "big") + (b"\1" if last else b"\0")


def sealed_size(plain_len: int, purpose: bytes) -> int:
    """The bytes a stream of ``plain_len`` plain bytes takes sealed (caps on stored blobs)."""
    records = max(1, -(-plain_len // CHUNK))
    return len(purpose) + 1 + _STREAM_ID_LEN + records * RECORD_OVERHEAD + plain_len


def _rechunk(pieces: Pieces, size: int) -> Iterator[tuple[Bytes, bool]]:
    """``pieces`` as records of ``size`` bytes (the last one shorter or as long, and at
    least one: an empty stream is one empty record), each with whether it is the last."""
    buf = bytearray()
    for piece in pieces:
        buf += piece
        while len(buf) > size:  # more bytes follow this record: not the last
            yield bytes(buf[:size]), False
            del buf[:size]
    yield bytes(buf), True


def _split(blob: Bytes, size: int) -> Iterator[tuple[Bytes, bool]]:
    """What :func:`_rechunk` makes of the one piece ``blob``, without copying it."""
    view = memoryview(blob)
    for start in range(0, max(len(view), 1), size):
        yield view[start : start + size], start + size >= len(view)


def _take(pieces: Pieces, size: int) -> tuple[bytes, Iterator[Bytes]]:
    """The first ``size`` bytes of ``pieces`` (fewer if there are not as many), and the rest."""
    rest = iter(pieces)
    buf = bytearray()
    for piece in rest:
        buf += piece
        if len(buf) >= size:
            break
    return bytes(buf[:size]), itertools.chain([bytes(buf[size:])], rest)


def _seal_records(
    records: Iterable[tuple[Bytes, bool]],
    launch_key: str,
    cluster_id: str,
    purpose: bytes,
    context: str,
) -> Iterator[bytes]:
    head = _stream_head(purpose)
    aead = _aead(launch_key, purpose)
    stream_id = secrets.token_bytes(_STREAM_ID_LEN)
    base = _base(purpose, cluster_id, context, stream_id)
    yield head + stream_id
    for index, (plain, last) in enumerate(records):
        nonce = secrets.token_bytes(_NONCE_LEN)
        yield nonce + aead.encrypt(nonce, plain, _record_aad(base, index, last))


def _open_records(
    head: Bytes,
    records: Iterable[tuple[Bytes, bool]],
    launch_key: str,
    cluster_id: str,
    purpose: bytes,
    context: str,
) -> Iterator[bytes]:
    from cryptography.exceptions import InvalidTag

    want = _stream_head(purpose)
    if len(head) != len(want) + _STREAM_ID_LEN or bytes(head[: len(want)]) != want:
        raise Rejected(f"not a sealed {purpose.decode(errors='replace')} payload")
    aead = _aead(launch_key, purpose)
    base = _base(purpose, cluster_id, context, bytes(head[len(want) :]))
    for index, (record, last) in enumerate(records):
        if len(record) < RECORD_OVERHEAD:
            raise Rejected("it is cut short")
        try:
            nonce, body = record[:_NONCE_LEN], record[_NONCE_LEN:]
            yield aead.decrypt(nonce, body, _record_aad(base, index, last))
        except InvalidTag:
            raise Rejected("it fails authentication with this launch's key") from None


def seal_chunks(
    pieces: Pieces, launch_key: str, cluster_id: str, purpose: bytes, context: str
) -> Iterator[bytes]:
    """The sealed stream of the bytes ``pieces`` yield: a header, then one sealed record
    per :data:`CHUNK` plain bytes (see the module's doc).  Concatenated, one blob."""
    records = _rechunk(pieces, CHUNK)
    return _seal_records(records, launch_key, cluster_id, purpose, context)


def open_chunks(
    pieces: Pieces, launch_key: str, cluster_id: str, purpose: bytes, context: str
) -> Iterator[bytes]:
    """The plain bytes of the sealed stream that ``pieces`` yield, one record at a time.

    Each record is authenticated before it is yielded; that the stream is whole (not cut
    after some record) is known only at its end: :class:`Rejected` may come after some
    records were yielded, and a caller that streams them on must then drop them.
    """
    head, body = _take(pieces, len(purpose) + 1 + _STREAM_ID_LEN)
    records = _rechunk(body, CHUNK + RECORD_OVERHEAD)
    return _open_records(head, records, launch_key, cluster_id, purpose, context)


def seal_payload(
    plain: bytes, launch_key: str, cluster_id: str, purpose: bytes, context: str
) -> bytes:
    """:func:`seal_chunks` of one blob, as one blob."""
    records = _split(plain, CHUNK)
    return b"".join(_seal_records(records, launch_key, cluster_id, purpose, context))


def open_payload(
    blob: bytes, launch_key: str, cluster_id: str, purpose: bytes, context: str
) -> bytes:
    """:func:`open_chunks` of one blob (:class:`Rejected` unless all of it is this launch's)."""
    view = memoryview(blob)
    size = len(purpose) + 1 + _STREAM_ID_LEN
    records = _split(view[size:], CHUNK + RECORD_OVERHEAD)
    opened = _open_records(view[:size], records, launch_key, cluster_id, purpose, context)
    return b"".join(opened)


__all__ = [
    "CHUNK",
    "Rejected",
    "open_chunks",
    "open_payload",
    "seal",
    "seal_chunks",
    "seal_payload",
    "sealed_size",
    "unseal",
]
