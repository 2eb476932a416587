"""Workers join only their own launch's head.

Anyone who can write a cluster's rendezvous prefix before its head publishes could
plant a head record pointing at a Ray head of their own.  The launcher gives every
node one per-launch key; the head signs its record (and the token's digest) with it,
and a worker ignores -- logs once, never joins -- a record that does not verify.
These run the real ``syndeo node`` as a worker against a file rendezvous holding a
planted record.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo import __version__
from syndeo.core import launchkey
from syndeo.core.errors import ConfigError
from syndeo.core.nodeconfig import NodeSettings
from syndeo.rendezvous import DoneRecord, HeadRecord, open_rendezvous
from tests.support.helpers import run_node

KEY = "a1" * 32
OTHER_KEY = "b2" * 32
TOKEN = b"the-cluster-token"
CID = "lk-node"


# ---------------------------------------------------------------------- sign / verify
def _fields() -> dict[str, object]:
    rec = HeadRecord(
        cluster_id=CID,
        attempt=0,
        ip="10.0.0.5",
        gcs_port=6379,
        ray_version="2.60.0",
        syndeo_version=__version__,
        nonce="abc",
        created_at=1795000000.125,
        hostname="h",
    )
    return rec.model_dump(mode="json")


def _signed(key: str = KEY, token: bytes = TOKEN) -> dict[str, object]:
    fields = _fields()
    fields["signature"] = launchkey.sign(key, fields, token)
    return fields


def test_a_signed_record_verifies_and_survives_a_json_round_trip() -> None:
    fields = _signed()
    assert launchkey.verify(KEY, fields, TOKEN)
    # What a worker reads back from the store: the record as JSON, parsed again.
    stored = HeadRecord.model_validate(fields).model_dump_json()
    assert launchkey.verify(KEY, json.loads(stored), TOKEN)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"ip": "10.6.6.6"}, "a tampered address"),
        ({"gcs_port": 1234}, "a tampered port"),
        ({"created_at": 1795000000.5}, "a tampered time"),
        ({"extra": "field"}, "a field added"),
        ({"signature": None}, "no signature"),
        ({"signature": ""}, "an empty signature"),
        ({"signature": "00" * 32}, "a made-up signature"),
    ],
)
def test_a_changed_record_is_rejected(change: dict[str, object], why: str) -> None:
    fields = {**_signed(), **change}
    assert not launchkey.verify(KEY, fields, TOKEN), why


def test_a_missing_signature_field_is_rejected() -> None:
    fields = _signed()
    del fields["signature"]
    assert not launchkey.verify(KEY, fields, TOKEN)


def test_another_key_or_another_token_is_rejected() -> None:
    assert not launchkey.verify(OTHER_KEY, _signed(), TOKEN)
    assert not launchkey.verify(KEY, _signed(OTHER_KEY), TOKEN)
    assert not launchkey.verify(KEY, _signed(), b"a-planted-token")


def test_keys_are_fresh_and_64_hex() -> None:
    keys = {launchkey.new_key() for _ in range(20)}
    assert len(keys) == 20 and all(launchkey.KEY_RE.match(k) for k in keys)


def test_the_key_is_a_node_setting_that_never_shows() -> None:
    s = NodeSettings(
        cluster_id=CID,
        rank=1,
        nodes=2,
        rendezvous="file:///x",
        scratch=Path("/tmp/s"),
        launch_key=KEY,
    )
    assert s.to_env()["SYNDEO_LAUNCH_KEY"] == KEY
    assert NodeSettings.from_env(s.to_env()) == s
    assert KEY not in repr(s) and KEY not in str(s)
    with pytest.raises(ConfigError) as err:
        NodeSettings.from_env({**s.to_env(), "SYNDEO_LAUNCH_KEY": KEY[:-1] + "Z"})
    assert "SYNDEO_LAUNCH_KEY" in str(err.value) and KEY[:10] not in str(err.value)


# ---------------------------------------------------------------------- a real worker
@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """Per test (Ray's temp dir below it tells whether the worker started Ray)."""
    path = Path(f"/tmp/syndeo-lk-{zlib.crc32(str(tmp_path).encode()):08x}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _node_env(tmp_path: Path, scratch: Path, **extra: str) -> dict[str, str]:
    env = {
        "SYNDEO_CLUSTER_ID": CID,
        "SYNDEO_RANK": "1",
        "SYNDEO_NODES": "2",
        "SYNDEO_RENDEZVOUS": (tmp_path / "rdv").as_uri(),
        "SYNDEO_SCRATCH": str(scratch),
        "SYNDEO_JOIN_TIMEOUT": "2",
        "SYNDEO_LAUNCH_KEY": KEY,
    }
    env.update(extra)
    return env


def _run_node(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_node(env, timeout=120)


def _plant(
    env: dict[str, str],
    signing_key: str | None,
    token: bytes = TOKEN,
    signed_token: bytes = TOKEN,
    done: bool = False,
    sealed: bool = True,
) -> None:
    """A head record (signed with ``signing_key``, or unsigned) and a token in the store
    (sealed with the same key, as a head does, unless ``sealed`` is False)."""
    rdv = open_rendezvous(env["SYNDEO_RENDEZVOUS"], CID)
    rdv.check()
    rdv.publish_token(token, signing_key if sealed else None)
    rec = HeadRecord(
        cluster_id=CID,
        attempt=0,
        ip="127.0.0.1",
        gcs_port=9,
        ray_version="x",
        syndeo_version=__version__,
        nonce="planted",
        created_at=time.time(),
        hostname="evil\nhost",
    )
    if signing_key is not None:
        sig = launchkey.sign(signing_key, rec.model_dump(mode="json"), signed_token)
        rec = rec.model_copy(update={"signature": sig})
    rdv.publish_head(rec)
    if done:
        rdv.mark_done(DoneRecord(exit_code=0, finished_at=time.time()))


@pytest.mark.parametrize(
    ("signing_key", "signed_token", "sealed"),
    [
        (None, TOKEN, True),
        (OTHER_KEY, TOKEN, True),
        (KEY, b"another token", True),
        (KEY, TOKEN, False),
    ],
    ids=["unsigned", "another-key", "token-not-the-signed-one", "token-not-sealed"],
)
def test_a_worker_never_joins_a_head_record_that_fails_the_check(
    tmp_path: Path, scratch: Path, signing_key: str | None, signed_token: bytes, sealed: bool
) -> None:
    env = _node_env(tmp_path, scratch)
    # A done record too: a worker that took the head would start Ray and leave with 0.
    _plant(env, signing_key, signed_token=signed_token, done=True, sealed=sealed)
    proc = _run_node(env)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (
        f"no head for cluster '{CID}' appeared at {env['SYNDEO_RENDEZVOUS']} within 2 s: "
        "a head record with a bad signature was seen and ignored ('127.0.0.1:9', host "
        "'evil\\nhost')"
    ) in proc.stderr
    ignored = [ln for ln in proc.stderr.splitlines() if "ignoring a head record" in ln]
    assert len(ignored) == 1, proc.stderr  # logged once, in one line, while it waited
    # It never started Ray towards that address.
    assert not (Path(env["SYNDEO_SCRATCH"]) / "r").exists()
    assert "joined head" not in proc.stderr and KEY not in proc.stderr


def test_a_worker_joins_a_head_signed_with_its_key(tmp_path: Path, scratch: Path) -> None:
    env = _node_env(tmp_path, scratch, SYNDEO_JOIN_TIMEOUT="60")
    _plant(env, KEY, done=True)
    proc = _run_node(env)
    # Taken: it started Ray towards the head, then saw the run was over and left.
    assert proc.returncode == 0, proc.stderr
    assert "head is done before this node finished starting; leaving" in proc.stderr
    assert "ignoring a head record" not in proc.stderr
    assert KEY not in proc.stderr + proc.stdout
