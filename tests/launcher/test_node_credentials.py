"""Nodes without a cloud identity (Slurm, ssh) get credentials made for their cluster,
not the launcher's own.

Against the real wire-protocol servers: moto (S3 and STS in one server) and Azurite.
The S3 session policy's meaning is checked with the IAM evaluator the deployer-policy
tests use (moto does not evaluate session policies); what sbatch passes to a job, with a
stand-in ``sbatch`` that records its environment.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syndeo.launcher.nodecreds import node_credentials, session_policy
from syndeo.rendezvous import open_rendezvous
from testbeds.objectstores import Server, make_bucket, running
from tests.launcher.conftest import StandInSbatch
from tests.support.helpers import environ
from tests.support.iam_eval import Request, allowed

LAUNCHER_SECRET = "launcher-secret-0123456789"  # recognisable wherever it would leak


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running("s3", tmp_path_factory.mktemp("s3")) as server:
        make_bucket(server, "team-bucket")
        yield server


@pytest.fixture
def launcher_env(s3: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A launcher signed in with an IAM user's long-term keys, through a profile."""
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[launcher]\naws_access_key_id = AKIALAUNCHER\naws_secret_access_key = {LAUNCHER_SECRET}\n"
    )
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    env = {
        "AWS_PROFILE": "launcher",
        "AWS_SHARED_CREDENTIALS_FILE": str(creds),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_DEFAULT_REGION": "us-east-1",
        # moto serves S3 and STS at one address.
        "AWS_ENDPOINT_URL_S3": s3.endpoint,
        "AWS_ENDPOINT_URL_STS": s3.endpoint,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _reach(uri: str, cluster_id: str, node_env: dict[str, str]) -> None:
    """What a node does with ``node_env`` as its whole environment: check the store, then
    write, read and remove its records."""
    with environ(node_env):
        rdv = open_rendezvous(uri, cluster_id)
        rdv.check()
        rdv.put_secret("probe", b"x")
        assert rdv.get_secret("probe") == b"x"
        rdv.cleanup(all_attempts=True)


@pytest.mark.objectstore
def test_s3_nodes_get_a_federation_token_for_their_prefix(launcher_env: dict[str, str]) -> None:
    before = time.time()
    creds = node_credentials("s3://team-bucket/team", "nc-1", 7200)
    env = creds.env
    assert creds.kind == "scoped to the cluster's prefix"
    assert sorted(creds.names) == [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ]
    assert env["AWS_ACCESS_KEY_ID"] != "AKIALAUNCHER" and env["AWS_SESSION_TOKEN"]
    assert LAUNCHER_SECRET not in json.dumps(env)
    # Where the launcher's own keys are (profile, files) is not passed on; the endpoints are.
    assert not {"AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"} & set(env)
    assert env["AWS_ENDPOINT_URL_S3"] == launcher_env["AWS_ENDPOINT_URL_S3"]
    assert creds.expires_at is not None and before + 7100 < creds.expires_at < time.time() + 7300
    # The nodes reach their records with them.
    node = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | env
    _reach("s3://team-bucket/team", "nc-1", node)


def test_the_session_policy_allows_the_clusters_records_only() -> None:
    policy = session_policy("team-bucket", "team", "nc-1")
    own = "arn:aws:s3:::team-bucket/team/nc-1/a0/head.json"
    assert allowed(policy, Request("s3:GetObject", own))
    assert allowed(policy, Request("s3:PutObject", own))
    assert allowed(policy, Request("s3:DeleteObject", own))
    for other in ("team/nc-2/a0/head.json", "team/nc-1x/a0/head.json", "elsewhere/x"):
        arn = f"arn:aws:s3:::team-bucket/{other}"
        assert not allowed(policy, Request("s3:GetObject", arn)), other
        assert not allowed(policy, Request("s3:PutObject", arn)), other
    bucket = "arn:aws:s3:::team-bucket"
    listing = Request("s3:ListBucket", bucket, {"s3:prefix": "team/nc-1/a0/"})
    assert allowed(policy, listing)
    for prefix in ("team/", "team/nc-2/", ""):
        req = Request("s3:ListBucket", bucket, {"s3:prefix": prefix})
        assert not allowed(policy, req), prefix
    other_bucket = "arn:aws:s3:::another-bucket/team/nc-1/a0/x"
    assert not allowed(policy, Request("s3:GetObject", other_bucket))


@pytest.mark.objectstore
def test_temporary_credentials_are_passed_by_value_and_called_unscoped(
    launcher_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in ("AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIAROLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "role-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "role-token")
    creds = node_credentials("s3://team-bucket/team", "nc-1", 7200)
    assert creds.kind == "temporary, not scoped"
    assert (creds.env["AWS_ACCESS_KEY_ID"], creds.env["AWS_SESSION_TOKEN"]) == (
        "ASIAROLE",
        "role-token",
    )


@pytest.mark.objectstore
def test_an_s3_store_without_sts_keeps_what_the_launcher_forwards(
    launcher_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_STS")
    creds = node_credentials("s3://team-bucket/team", "nc-1", 7200)
    assert creds.names == [] and creds.kind.startswith("forwarded, not scoped")
    assert creds.env["AWS_PROFILE"] == "launcher"


@pytest.mark.objectstore
def test_a_slurm_job_gets_the_made_credentials_and_none_of_the_launchers(
    launcher_env: dict[str, str], fake_sbatch: StandInSbatch, tmp_path: Path
) -> None:
    sb = fake_sbatch.submit("s3://team-bucket/team", "nc-slurm")
    env, said = sb.env, sb.said
    assert env["AWS_SESSION_TOKEN"] and env["AWS_ACCESS_KEY_ID"] != "AKIALAUNCHER"
    assert "AWS_PROFILE" not in env and "AWS_SHARED_CREDENTIALS_FILE" not in env
    assert LAUNCHER_SECRET not in json.dumps(env)
    script = sb.script
    assert env["AWS_SESSION_TOKEN"] not in script and env["AWS_SECRET_ACCESS_KEY"] not in script
    assert '"${AWS_SESSION_TOKEN}"' in script and "AWS_PROFILE" not in script
    [line] = [s for s in said if "node credentials" in s]
    assert "scoped to the cluster's prefix until" in line


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running("az", tmp_path_factory.mktemp("az")) as server:
        make_bucket(server, "rdv")
        make_bucket(server, "other")
        yield server


@pytest.mark.objectstore
def test_azure_nodes_get_a_container_sas_not_the_account_key(
    azurite: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import ContainerClient

    for k, v in azurite.env.items():
        monkeypatch.setenv(k, v)
    creds = node_credentials("az://rdv/team", "nc-az", 3600)
    env = creds.env
    key = azurite.env["AZURE_STORAGE_CONNECTION_STRING"].split("AccountKey=")[1].split(";")[0]
    assert creds.kind == "a SAS of container rdv" and creds.names == ["AZURE_STORAGE_SAS_TOKEN"]
    assert "AZURE_STORAGE_CONNECTION_STRING" not in env and key not in json.dumps(env)
    node = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_")} | env
    _reach("az://rdv/team", "nc-az", node)
    # Another container of the account is out of its reach.
    url = env["SYNDEO_AZURE_ACCOUNT_URL"]
    other = ContainerClient(url, "other", credential=env["AZURE_STORAGE_SAS_TOKEN"])
    with pytest.raises(HttpResponseError) as denied:
        other.upload_blob("x", b"x")
    assert denied.value.status_code == 403


@pytest.mark.objectstore
def test_forward_passes_the_launchers_own_by_reference(
    launcher_env: dict[str, str], fake_sbatch: StandInSbatch, tmp_path: Path
) -> None:
    """``node_credentials = "forward"`` (an `up` cluster that must outlive STS's 36 h):
    the job inherits the launcher's own, named in the script, as before."""
    sb = fake_sbatch.submit(
        "s3://team-bucket/team", "nc-fwd", time=None, node_credentials="forward"
    )
    env, said = sb.env, sb.said
    assert env["AWS_PROFILE"] == "launcher" and "AWS_SESSION_TOKEN" not in env
    assert not [s for s in said if "node credentials" in s]
