"""Ray's own TLS for one cluster: a CA per launch, and how it travels.

Ray (2.60) encrypts its gRPC traffic when every process and every client has
``RAY_USE_TLS=1`` and the three files named by ``RAY_TLS_SERVER_CERT``,
``RAY_TLS_SERVER_KEY`` and ``RAY_TLS_CA_CERT``: the TLS is mutual (a server takes only
clients whose certificate the CA signed) and a client checks that the server's
certificate names the address it dialled (an IP SAN).  So each node needs a certificate
of its own, made where its address is known: on the node.

The launcher makes a fresh CA per launch (EC P-256, valid :data:`VALIDITY`) and hands
the CA's certificate and key to the nodes through the cluster's rendezvous prefix,
sealed with AES-GCM under a key derived (HKDF-SHA256) from the launch key, which every
target already delivers to each node; the cluster id is the associated data, so a
bundle of another cluster (or a changed one) fails authentication.  Whoever can write
the prefix can therefore neither read the CA key nor plant a CA of their own; whoever
reads a node's settings holds the launch key and could -- as with the head record's
signature (syndeo/core/launchkey.py), this guards the store, not the machines.

The CA key exists on disk nowhere but in the sealed bundle: a node keeps it in memory
only (Ray needs the CA's certificate, not its key), and the launcher forgets it once
the bundle and its client certificate are made.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from syndeo.core import sealed
from syndeo.core.errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

# cryptography (~50 ms to import) is imported inside the functions that use it: a node
# or a launcher without TLS never loads it.

# The node-side switch: a backend-style variable (like SYNDEO_S3_ENDPOINT_URL), not a
# NodeSettings field -- every target passes it the way it passes its extra variables.
ENV_VAR = "SYNDEO_TLS"
# How long a launch's CA (and so every certificate it signs) is valid.  An `up` cluster
# that must take new nodes or clients after this needs a new `up`.
VALIDITY = datetime.timedelta(days=7)
# Certificates start this long before they are made: a node whose clock lags the
# launcher's by up to this still accepts them.
CLOCK_SKEW = datetime.timedelta(hours=1)
# Sealed with syndeo/core/sealed.py for this purpose (its HKDF info: a key for nothing but
# the bundle): MAGIC | 12-byte nonce | AES-256-GCM(JSON {ca_cert, ca_key}).
_INFO = b"syndeo tls bundle v1"
MAGIC = _INFO + b"\n"


class BundleRejected(Exception):
    """A sealed bundle that is not this launch's (another key, cluster, or tampered)."""


def enabled(env: Mapping[str, str]) -> bool:
    """Whether ``SYNDEO_TLS`` turns TLS on; anything but 1/0/unset is refused (one line)."""
    value = env.get(ENV_VAR, "")
    if value not in ("", "0", "1"):
        raise ConfigError(f"invalid node environment: {ENV_VAR} must be 1 or 0, not {value!r}")
    return value == "1"


def ray_env(ca_cert: str, cert: str, key: str) -> dict[str, str]:
    """The four variables that turn Ray's TLS on, for a Ray process or a client."""
    return {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": cert,
        "RAY_TLS_SERVER_KEY": key,
        "RAY_TLS_CA_CERT": ca_cert,
    }


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class Authority:
    """A cluster's CA: its certificate (PEM) and, kept out of every repr, its key."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)

    def issue(self, name: str, ips: Iterable[str], dns: Iterable[str] = ()) -> tuple[bytes, bytes]:
        """A fresh key and a certificate for it, signed by this CA, naming ``ips`` and
        ``dns`` (SANs), valid until the CA is; (certificate PEM, key PEM)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        ca = x509.load_pem_x509_certificate(self.cert_pem)
        ca_key = serialization.load_pem_private_key(self.key_pem, password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for ip in dict.fromkeys(ips):
            sans.append(x509.IPAddress(ipaddress.ip_address(ip)))
        for host in dict.fromkeys(dns):
            if host and host.isascii():  # a DNS SAN is ASCII; an odd hostname is left out
                sans.append(x509.DNSName(host))
        usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name[:64])]))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - CLOCK_SKEW)
            .not_valid_after(ca.not_valid_after_utc)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            # Every Ray process is a server and a client of the others with one certificate.
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def new_authority(cluster_id: str) -> Authority:
    """A fresh CA for one launch of ``cluster_id``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"syndeo {cluster_id} CA")])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + VALIDITY)
        # It signs the cluster's leaf certificates and nothing else (no sub-CAs).
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Authority(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def seal(authority: Authority, launch_key: str, cluster_id: str) -> bytes:
    """The CA (certificate and key) as a blob only this launch's nodes can open."""
    plain = json.dumps(
        {"ca_cert": authority.cert_pem.decode(), "ca_key": authority.key_pem.decode()}
    ).encode()
    return sealed.seal(plain, launch_key, cluster_id, _INFO)


def unseal(blob: bytes, launch_key: str, cluster_id: str) -> Authority:
    """The CA in ``blob``, or :class:`BundleRejected` if it fails authentication."""
    from cryptography import x509

    try:
        plain = sealed.unseal(blob, launch_key, cluster_id, _INFO)
    except sealed.Rejected as exc:
        raise BundleRejected(str(exc)) from None
    try:
        data = json.loads(plain)
        authority = Authority(data["ca_cert"].encode(), data["ca_key"].encode())
        x509.load_pem_x509_certificate(authority.cert_pem)
    except (ValueError, KeyError, TypeError, AttributeError):
        # Authentic but unreadable: a launcher of another version; still not usable.
        raise BundleRejected("its content is not a CA this version can read") from None
    return authority


def local_addresses() -> list[str]:
    """Every IP address of this machine's interfaces (loopback included)."""
    import psutil  # a dependency of syndeo; imported here: only TLS needs it in core

    found: list[str] = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                ip = a.address.split("%", 1)[0]  # an IPv6 link-local's zone id
                try:
                    ipaddress.ip_address(ip)
                except ValueError:
                    continue
                found.append(ip)
    return list(dict.fromkeys(found))


__all__ = [
    "ENV_VAR",
    "VALIDITY",
    "Authority",
    "BundleRejected",
    "enabled",
    "local_addresses",
    "new_authority",
    "ray_env",
    "seal",
    "unseal",
]
