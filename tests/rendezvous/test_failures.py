"""Cloud backends fail with one clear line, within the deadline, when the store is unusable."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from syndeo.core.errors import RendezvousError, RendezvousTimeout
from syndeo.rendezvous import open_rendezvous
from testbeds.objectstores import AZURITE_KEY, Server, azurite_connection_string, free_port, running
from tests.rendezvous.conftest import CLOUD, cloud_backend, fresh_name

# Worst case of the SDK retry budget (_cloud: 4 attempts / 8 s) plus slack for a busy box.
FAIL_WITHIN_S = 40.0


def one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.mark.objectstore
@pytest.mark.parametrize("kind", CLOUD)
def test_missing_bucket(
    kind: str, shared_server: Callable[[str], Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = cloud_backend(kind, shared_server(kind), monkeypatch, create=False)
    bucket = backend.uri.split("/")[2]
    with pytest.raises(RendezvousError, match="does not exist") as info:
        backend.open().check()
    assert bucket in one_line(info.value)
    # A worker that skipped check() still fails fast instead of waiting out its deadline.
    start = time.monotonic()
    with pytest.raises(RendezvousError, match="does not exist") as info:
        backend.open().wait_for_head(timeout_s=60)
    assert not isinstance(info.value, RendezvousTimeout)
    assert time.monotonic() - start < FAIL_WITHIN_S


def _closed_port_env(kind: str) -> dict[str, str]:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    return {
        "s3": {"AWS_ENDPOINT_URL_S3": endpoint},
        "gs": {"STORAGE_EMULATOR_HOST": endpoint},
        "az": {"AZURE_STORAGE_CONNECTION_STRING": azurite_connection_string(endpoint, AZURITE_KEY)},
    }[kind]


@pytest.mark.objectstore
@pytest.mark.parametrize("kind", CLOUD)
def test_unreachable_endpoint(
    kind: str, shared_server: Callable[[str], Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = cloud_backend(kind, shared_server(kind), monkeypatch, create=False)
    for name, value in _closed_port_env(kind).items():
        monkeypatch.setenv(name, value)
    start = time.monotonic()
    with pytest.raises(RendezvousError, match="unreachable") as info:
        backend.open().check()
    assert time.monotonic() - start < FAIL_WITHIN_S
    assert backend.uri.split("/")[2] in one_line(info.value)


@pytest.mark.objectstore
@pytest.mark.parametrize("kind", CLOUD)
def test_server_dies_while_worker_waits(
    kind: str, server_log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running(kind, server_log_dir) as server:
        backend = cloud_backend(kind, server, monkeypatch)
        rv = backend.open()
        rv.check()
        outcome: list[BaseException] = []

        def wait() -> None:
            try:
                rv.wait_for_head(timeout_s=120)
            except BaseException as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(1.0)  # the worker is polling now
        server.kill()  # by PID, SIGKILL
        killed = time.monotonic()
        waiter.join(timeout=120)
        assert not waiter.is_alive()
    assert len(outcome) == 1
    err = outcome[0]
    assert isinstance(err, RendezvousError) and not isinstance(err, RendezvousTimeout), err
    assert "unreachable" in one_line(err)
    assert time.monotonic() - killed < FAIL_WITHIN_S


@pytest.mark.objectstore
def test_s3_denied_credentials(server_log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto enforces IAM after its first N requests: a key without rights, a wrong secret."""
    import boto3

    with running("s3", server_log_dir, {"INITIAL_NO_AUTH_ACTION_COUNT": "3"}) as server:
        admin = {
            "endpoint_url": server.endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        iam = boto3.session.Session().client("iam", **admin)
        iam.create_user(UserName="nobody")
        key = iam.create_access_key(UserName="nobody")["AccessKey"]
        bucket = fresh_name("b")
        boto3.session.Session().client("s3", **admin).create_bucket(Bucket=bucket)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        for secret, cause in [
            (key["SecretAccessKey"], "access denied"),  # valid user, no policy
            ("wrong-secret", "secret access key is wrong"),
        ]:
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
            rv = open_rendezvous(f"s3://{bucket}/p", "c1")
            with pytest.raises(RendezvousError, match=cause) as info:
                rv.check()
            assert bucket in one_line(info.value)
            with pytest.raises(RendezvousError, match=cause):
                rv.wait_for_head(timeout_s=60)


@pytest.mark.objectstore
def test_azure_denied_credentials(
    shared_server: Callable[[str], Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = cloud_backend("az", shared_server("az"), monkeypatch)
    wrong_key = "d3Jvbmcta2V5LW5vdC10aGUtYXp1cml0ZS1vbmUtYXQtYWxsLWp1c3Qtd3Jvbmc="
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        azurite_connection_string(backend.server.endpoint if backend.server else "", wrong_key),
    )
    with pytest.raises(RendezvousError, match="access denied") as info:
        backend.open().check()
    assert backend.uri.split("/")[2] in one_line(info.value)
    with pytest.raises(RendezvousError, match="access denied"):
        backend.open().wait_for_head(timeout_s=60)


# -------------------------------------------------------------- no credentials at all
def _run_check(uri: str, env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    """``check()`` in a process with a clean environment, as a fresh node would run it."""
    code = (
        "import sys\n"
        "from syndeo.core.errors import SyndeoError\n"
        "from syndeo.rendezvous import open_rendezvous\n"
        "try:\n"
        "    open_rendezvous(sys.argv[1], 'c1').check()\n"
        "except SyndeoError as e:\n"
        "    print(e, file=sys.stderr); sys.exit(e.exit_code)\n"
    )
    clean = {"PATH": os.environ["PATH"], "HOME": str(home), **env}
    return subprocess.run(
        [sys.executable, "-c", code, uri],
        env=clean,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize(
    ("kind", "env", "cause"),
    [
        ("s3", {"AWS_EC2_METADATA_DISABLED": "true"}, "no AWS credentials found"),
        # NO_GCE_CHECK + a closed metadata port keep google-auth off the network.
        ("gs", {"NO_GCE_CHECK": "true"}, "no Google credentials found"),
        ("az", {}, "no storage account"),
        # azure-identity (the cloud extra) tries every login it knows, finds none.
        ("az", {"AZURE_STORAGE_ACCOUNT": "acct"}, "no usable Azure credential"),
    ],
)
def test_no_credentials(kind: str, env: dict[str, str], cause: str, tmp_path: Path) -> None:
    closed = f"127.0.0.1:{free_port()}"
    env = {
        **env,
        "AWS_ENDPOINT_URL_S3": f"http://{closed}",
        "GCE_METADATA_HOST": closed,
        "GCE_METADATA_IP": closed,
    }
    out = _run_check(f"{kind}://bucket-x/p", env, tmp_path)
    assert out.returncode == 2, out.stderr
    assert cause in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


# -------------------------------------------------------------- input and imports
@pytest.mark.parametrize(
    "uri", ["s3://", "s3://B/x", "gs://ab", "az://cont/../x", "s3://bucket-x/p?versionId=1"]
)
def test_bad_uri_is_one_clear_line(uri: str) -> None:
    with pytest.raises(RendezvousError) as info:
        open_rendezvous(uri, "c1")
    assert uri.split("://")[0] in one_line(info.value)


def test_importing_syndeo_imports_no_cloud_sdk(tmp_path: Path) -> None:
    code = (
        "import sys, syndeo, syndeo.rendezvous, syndeo.rendezvous.base\n"
        "from syndeo.rendezvous import open_rendezvous\n"
        f"open_rendezvous('file://{tmp_path}/rv', 'c1').check()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'azure')\n"
        "       or m.startswith('google.cloud') or m.startswith('google.auth')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
