"""The per-launch key: how a worker tells its own launch's head from a planted one.

Anyone who can write a cluster's rendezvous prefix before its head does (a deployer,
another cluster's node where identities reach the whole bucket) could publish a head
record pointing at a Ray head of their own, and workers would join it and run its code
with their identity.  The launcher therefore makes one random key per launch and puts
it in every node's settings (``SYNDEO_LAUNCH_KEY``; never printed, logged or recorded
in deploy.json).  The head signs its record with it (HMAC-SHA256); a worker joins only
a head whose record verifies with its own key.

The signed material binds the Ray token too (its SHA-256): the token is a separate
blob in the store, and a worker must never take a token its head did not publish with
that record (nor a forged record and token pair as a whole).  Who can read a node's
settings (its user-data, env file, sbatch environment) has the key: this guards the
store, not the machines.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

KEY_RE = re.compile(r"^[0-9a-f]{64}$")
# The record field that carries the signature (left out of what is signed).
SIGNATURE_FIELD = "signature"
# Not a record field: the token's digest is added to the signed material under this
# name, so the signature covers the token without the record revealing anything of it.
_TOKEN_FIELD = "_token_sha256"


def new_key() -> str:
    """32 random bytes, hex (what ``SYNDEO_LAUNCH_KEY`` holds)."""
    return secrets.token_hex(32)


def _material(fields: Mapping[str, Any], token: bytes) -> bytes:
    body = {k: v for k, v in fields.items() if k != SIGNATURE_FIELD}
    body[_TOKEN_FIELD] = hashlib.sha256(token).hexdigest()
    # Sorted keys, no whitespace: the same bytes from the head's dict and from the
    # worker's parse of the stored JSON (floats round-trip exactly through repr).
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sign(key: str, fields: Mapping[str, Any], token: bytes) -> str:
    """The signature of a record's ``fields`` (any ``signature`` field left out) and ``token``."""
    if not KEY_RE.match(key):
        raise ValueError("a launch key is 64 hex digits")
    return hmac.new(bytes.fromhex(key), _material(fields, token), hashlib.sha256).hexdigest()


def verify(key: str, fields: Mapping[str, Any], token: bytes) -> bool:
    """True if ``fields["signature"]`` is ``key``'s signature of the other fields and ``token``."""
    return _signed_as(fields, lambda: sign(key, fields, token))


def _signed_as(fields: Mapping[str, Any], expected: Callable[[], str]) -> bool:
    signature = fields.get(SIGNATURE_FIELD)
    if not isinstance(signature, str):
        return False
    try:
        wanted = expected()
    except (ValueError, TypeError):  # a field JSON cannot hold: not a record we made
        return False
    return hmac.compare_digest(signature.encode(), wanted.encode())


# ---------------------------------------------------------------------- other records
# Records the launcher writes for the head (a job, a cancel request) are signed with a key
# derived from the launch key for their kind, never with the launch key itself: a
# signature made for one kind can never pass as another's (a job's as a head record's).
def _derived(key: str, purpose: str) -> bytes:
    if not KEY_RE.match(key):
        raise ValueError("a launch key is 64 hex digits")
    info = b"syndeo record: " + purpose.encode()
    return hmac.new(bytes.fromhex(key), info, hashlib.sha256).digest()


def _record_material(fields: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in fields.items() if k != SIGNATURE_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sign_record(key: str, purpose: str, fields: Mapping[str, Any]) -> str:
    """The signature of a ``purpose`` record's ``fields`` (any ``signature`` field left out)."""
    return hmac.new(_derived(key, purpose), _record_material(fields), hashlib.sha256).hexdigest()


def verify_record(key: str, purpose: str, fields: Mapping[str, Any]) -> bool:
    """True if ``fields["signature"]`` is ``key``'s signature of the others for ``purpose``."""
    return _signed_as(fields, lambda: sign_record(key, purpose, fields))
