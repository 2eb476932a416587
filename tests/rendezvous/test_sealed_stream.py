"""Payloads are sealed as a stream of fixed-size records (syndeo/core/sealed.py), so a
wheelhouse of hundreds of MB can be sealed and opened chunk by chunk: each record is
bound to its index, to whether it is the last, and to its stream."""

from __future__ import annotations

import os

import pytest

from syndeo.core import launchkey, sealed
from syndeo.core.sealed import CHUNK, RECORD_OVERHEAD

KEY = launchkey.new_key()
PURPOSE = b"syndeo payload test v1"
HEAD = len(PURPOSE) + 1 + 16  # purpose, newline, the stream's id
RECORD = CHUNK + RECORD_OVERHEAD


def _seal(plain: bytes, context: str = "a0/x") -> bytes:
    return sealed.seal_payload(plain, KEY, "c1", PURPOSE, context)


def _open(blob: bytes, context: str = "a0/x") -> bytes:
    return sealed.open_payload(blob, KEY, "c1", PURPOSE, context)


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
def test_a_stream_opens_whole_in_any_pieces_and_has_the_size_it_is_said_to(size: int) -> None:
    plain = os.urandom(size)
    blob = _seal(plain)
    assert len(blob) == sealed.sealed_size(size, PURPOSE)
    assert _open(blob) == plain
    # Sealed from pieces of another size, opened from pieces of yet another.
    pieces = [plain[i : i + 300_001] for i in range(0, size, 300_001)]
    streamed = b"".join(sealed.seal_chunks(pieces, KEY, "c1", PURPOSE, "a0/x"))
    assert len(streamed) == len(blob)
    for step in (7, 777_777, len(streamed) or 1):
        parts = [streamed[i : i + step] for i in range(0, len(streamed), step)]
        assert b"".join(sealed.open_chunks(parts, KEY, "c1", PURPOSE, "a0/x")) == plain


def test_records_cannot_be_reordered_dropped_cut_off_or_taken_from_another_stream() -> None:
    plain = os.urandom(3 * CHUNK + 5)
    blob = _seal(plain)
    records = [blob[HEAD + i * RECORD : HEAD + (i + 1) * RECORD] for i in range(4)]
    head = blob[:HEAD]
    other = _seal(plain)  # the same bytes, the same place: another stream
    forged = {
        "reordered": head + records[1] + records[0] + records[2] + records[3],
        "a record dropped": head + records[0] + records[2] + records[3],
        "cut after a whole record": head + records[0] + records[1],
        "cut inside a record": blob[:-1],
        "a record of another stream": head + other[HEAD : HEAD + RECORD] + b"".join(records[1:]),
        "the header alone": head,
        "empty": b"",
    }
    for what, bad in forged.items():
        with pytest.raises(sealed.Rejected):
            _open(bad)
            pytest.fail(f"{what}: opened")
        with pytest.raises(sealed.Rejected):
            b"".join(sealed.open_chunks([bad], KEY, "c1", PURPOSE, "a0/x"))
            pytest.fail(f"{what}: opened in pieces")


def test_a_stream_opens_only_with_its_key_cluster_purpose_and_place() -> None:
    blob = _seal(b"secret words")
    for key, cluster, purpose, context in (
        (launchkey.new_key(), "c1", PURPOSE, "a0/x"),
        (KEY, "c2", PURPOSE, "a0/x"),
        (KEY, "c1", b"syndeo payload other v1", "a0/x"),
        (KEY, "c1", PURPOSE, "a0/y"),
    ):
        with pytest.raises(sealed.Rejected):
            sealed.open_payload(blob, key, cluster, purpose, context)
    assert b"secret words" not in blob
