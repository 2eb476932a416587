"""Small secrets sealed for one launch's nodes: AES-256-GCM under a key derived from the
launch key (the cluster's CA for TLS, the nodes' GCS token).

Each use names its own ``purpose`` (the HKDF info): a key made for one kind of blob can
never open another kind, even of the same launch.  The cluster id is the associated
data, so a blob of another cluster, or a changed one, fails authentication.  Whoever can
write the cluster's prefix can neither read a sealed blob nor plant one the nodes take;
whoever reads a node's settings holds the launch key (as for the head record's
signature, this guards the store, not the machines).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from syndeo.core.launchkey import KEY_RE

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# cryptography is imported inside the functions: a node that seals nothing never loads it.
_NONCE_LEN = 12
_TAG_LEN = 16


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


__all__ = ["Rejected", "seal", "unseal"]
