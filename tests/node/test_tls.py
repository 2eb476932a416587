"""Ray's TLS, the node's side: the sealed CA and the node's certificate.

The launcher seals the cluster's CA with a key derived from the launch key (AES-GCM, the
cluster id as associated data) into the rendezvous; a node opens it, makes its own
certificate, and never uses a bundle that fails authentication.  These run without a
Ray cluster: the crypto directly, and the real ``syndeo node`` as a worker against a
file rendezvous holding a foreign or changed bundle.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from syndeo.core import tls
from syndeo.core.errors import ConfigError, RendezvousTimeout
from syndeo.core.nodeconfig import NodeSettings
from syndeo.launcher import tls as launcher_tls
from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.node import main as node_main
from syndeo.node import tls as node_tls
from syndeo.rendezvous import open_rendezvous
from tests.support.helpers import environ, run_node

KEY = "a1" * 32
OTHER_KEY = "b2" * 32
CID = "tls-node"


@pytest.fixture(scope="module")
def ca() -> tls.Authority:
    return tls.new_authority(CID)


# ---------------------------------------------------------------------- the bundle
def test_a_sealed_bundle_opens_with_its_launch_key_and_cluster_only(ca: tls.Authority) -> None:
    blob = tls.seal(ca, KEY, CID)
    assert tls.unseal(blob, KEY, CID) == ca
    # The CA key is not readable in the store.
    assert b"PRIVATE KEY" not in blob and ca.key_pem not in blob
    assert ca.key_pem.decode() not in repr(ca)
    with pytest.raises(tls.BundleRejected, match="fails authentication"):
        tls.unseal(blob, OTHER_KEY, CID)  # another launch's key
    with pytest.raises(tls.BundleRejected, match="fails authentication"):
        tls.unseal(blob, KEY, "tls-other")  # another cluster's bundle, copied over


@pytest.mark.parametrize("where", [len(tls.MAGIC), len(tls.MAGIC) + 12, -1])
def test_a_changed_bundle_is_rejected(ca: tls.Authority, where: int) -> None:
    blob = bytearray(tls.seal(ca, KEY, CID))
    blob[where] ^= 0x01  # the nonce, the ciphertext, the tag
    with pytest.raises(tls.BundleRejected):
        tls.unseal(bytes(blob), KEY, CID)
    with pytest.raises(tls.BundleRejected):
        tls.unseal(bytes(blob[:40]), KEY, CID)


def test_the_ca_is_short_lived_and_signs_only_leaves(ca: tls.Authority) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert life <= tls.VALIDITY + tls.CLOCK_SKEW
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert basic.ca and basic.path_length == 0
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]


# ---------------------------------------------------------------------- a node's certificate
def _settings(tmp_path: Path, scratch: Path, **over: object) -> NodeSettings:
    base: dict[str, object] = dict(
        cluster_id=CID,
        rank=1,
        nodes=2,
        rendezvous=(tmp_path / "rdv").as_uri(),
        scratch=scratch,
        node_ip="127.0.0.11",
        join_timeout=5.0,
        launch_key=KEY,
    )
    base.update(over)
    return NodeSettings.model_validate(base)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    path = Path(f"/tmp/syndeo-tls-{zlib.crc32(str(tmp_path).encode()):08x}")
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_node_makes_its_own_certificate_signed_by_the_ca(
    ca: tls.Authority, tmp_path: Path, scratch: Path
) -> None:
    s = _settings(tmp_path, scratch)
    rdv = open_rendezvous(s.rendezvous, CID)
    rdv.check()
    rdv.put_tls_bundle(tls.seal(ca, KEY, CID))
    env = node_tls.prepare(s, rdv, lambda m: pytest.fail(m))
    assert env["RAY_USE_TLS"] == "1"
    files = [Path(env[k]) for k in ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")]
    assert {p.parent for p in files} == {scratch}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert Path(env["RAY_TLS_CA_CERT"]).read_bytes() == ca.cert_pem
    # The CA's key is nowhere on the node's disk.
    assert not any(ca.key_pem in p.read_bytes() for p in scratch.iterdir())
    cert = x509.load_pem_x509_certificate(Path(env["RAY_TLS_SERVER_CERT"]).read_bytes())
    issuer = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(issuer)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.11", "127.0.0.1"} <= ips
    assert socket.gethostname() in sans.get_values_for_type(x509.DNSName)
    node_tls.remove(scratch)
    assert list(scratch.iterdir()) == []


def test_without_a_node_ip_every_address_of_the_machine_is_named(tmp_path: Path) -> None:
    s = _settings(tmp_path, Path("/tmp/x"), node_ip=None)
    names = node_tls.node_addresses(s)
    assert "127.0.0.1" in names and all(ipaddress.ip_address(n) for n in names)
    assert set(tls.local_addresses()) <= set(names)


# ---------------------------------------------------------------------- the real node
def _node_env(tmp_path: Path, scratch: Path, **extra: str) -> dict[str, str]:
    env = {
        "SYNDEO_CLUSTER_ID": CID,
        "SYNDEO_RANK": "1",
        "SYNDEO_NODES": "2",
        "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "2",
        "SYNDEO_LAUNCH_KEY": KEY,
        "SYNDEO_TLS": "1",
    }
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("key", "cluster", "flip"),
    [(OTHER_KEY, CID, False), (KEY, "tls-other", False), (KEY, CID, True)],
    ids=["another-launch-key", "another-cluster", "changed-in-the-store"],
)
def test_a_node_refuses_a_bundle_that_fails_authentication(
    ca: tls.Authority, tmp_path: Path, scratch: Path, key: str, cluster: str, flip: bool
) -> None:
    env = _node_env(tmp_path, scratch)
    rdv = open_rendezvous(env["SYNDEO_RENDEZVOUS"], CID)
    rdv.check()
    blob = bytearray(tls.seal(ca, key, cluster))
    if flip:
        blob[-5] ^= 0x80
    rdv.put_tls_bundle(bytes(blob))
    proc = run_node(env, timeout=120)
    assert proc.returncode == 3, proc.stderr  # the wait's timeout, never a join
    assert "Traceback" not in proc.stderr
    refused = [ln for ln in proc.stderr.splitlines() if "refusing the TLS bundle" in ln]
    assert len(refused) == 1, proc.stderr  # logged once, one line, while it waited
    assert "fails authentication with this launch's key" in refused[0]
    assert (
        f"no TLS bundle for cluster '{CID}' at {env['SYNDEO_RENDEZVOUS']} within 2 s: one was "
        "there but refused"
    ) in proc.stderr
    # Nothing started: no Ray temp dir, no certificate; no secret in what it said.
    assert not (scratch / "r").exists()
    assert not any(scratch.glob("tls-*"))
    assert KEY not in proc.stderr and b"PRIVATE" not in proc.stderr.encode()


def test_tls_without_a_launch_key_or_with_a_bad_switch_is_one_line_before_anything(
    tmp_path: Path, scratch: Path
) -> None:
    env = _node_env(tmp_path, scratch / "n")
    del env["SYNDEO_LAUNCH_KEY"]
    proc = run_node({**env, "SYNDEO_LAUNCH_KEY": ""}, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "syndeo: error: invalid node environment: SYNDEO_TLS=1 needs SYNDEO_LAUNCH_KEY (the "
        "key that opens the cluster's TLS bundle)"
    )
    assert not (scratch / "n").exists()  # before the scratch dir, the store, Ray
    bad = run_node({**_node_env(tmp_path, scratch / "n"), "SYNDEO_TLS": "yes"}, timeout=60)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines()[-1] == (
        "syndeo: error: invalid node environment: SYNDEO_TLS must be 1 or 0, not 'yes'"
    )


def test_the_launcher_refuses_tls_without_a_launch_key() -> None:
    spec = ClusterSpec.from_config(load_config(tls=True), "file:///tmp/r", "tls-nokey")
    assert spec.tls and spec.node_env(0, Path("/tmp/s"))["SYNDEO_TLS"] == "1"
    old = spec.model_copy(update={"launch_key": None})  # a spec saved before launch keys
    with pytest.raises(ConfigError, match=r"^tls: cluster tls-nokey has no launch key"):
        launcher_tls.new_authority(old)
    plain = ClusterSpec.from_config(load_config(), "file:///tmp/r", "tls-off")
    assert "SYNDEO_TLS" not in plain.node_env(0, Path("/tmp/s"))
    assert launcher_tls.new_authority(plain) is None


def test_the_node_removes_its_tls_files_when_it_ends(
    ca: tls.Authority, tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that got its certificate and then found no head: on its way out its key
    and certificates go (the local target removes whole scratch dirs, a Slurm job's or
    a VM's may stay: this is the node's own teardown)."""
    env = _node_env(tmp_path, scratch, SYNDEO_NODE_IP="127.0.0.11", SYNDEO_JOIN_TIMEOUT="2")
    rdv = open_rendezvous(env["SYNDEO_RENDEZVOUS"], CID)
    rdv.check()
    rdv.put_tls_bundle(tls.seal(ca, KEY, CID))
    made: dict[str, str] = {}
    real = node_tls.prepare

    def recording(*args: Any) -> dict[str, str]:
        made.update(real(*args))
        return made

    monkeypatch.setattr(node_tls, "prepare", recording)
    with environ({**os.environ, **env}), pytest.raises(RendezvousTimeout, match="no head"):
        node_main.main()
    files = [
        Path(made[k]) for k in ("RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
    ]
    assert [p.parent for p in files] == [scratch] * 3  # made where the node keeps its token
    assert [p for p in files if p.exists()] == []
    assert scratch.is_dir()  # the dir stays; only its secrets went
