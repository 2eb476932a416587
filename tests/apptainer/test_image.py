"""The real image: built by Packer + Apptainer, cached, its manifest honest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from syndeo.image import build, inputs, manifest
from testbeds.image import COMPRESSION

pytestmark = [pytest.mark.apptainer, pytest.mark.slow]


def test_manifest_matches_the_sif(built_image: manifest.ImageManifest, sif: Path) -> None:
    assert sif.stat().st_size == built_image.size_bytes
    assert manifest.sha256_file(sif) == built_image.sha256
    assert manifest.image_digest(sif) == f"sha256:{built_image.sha256}"
    assert built_image.versions["ray"] == "2.60.0"
    assert built_image.versions["python"].startswith("3.11.")
    assert built_image.versions["syndeo"] == __import__("syndeo").__version__
    assert built_image.base == "debootstrap"
    assert built_image.build_seconds > 0
    assert manifest.verify_sif(sif) == built_image


def test_rebuild_with_nothing_changed_is_a_noop(
    built_image: manifest.ImageManifest, sif: Path
) -> None:
    mtime = sif.stat().st_mtime_ns
    again = build.build("debootstrap", sif, compression=COMPRESSION)
    assert again.sha256 == built_image.sha256
    assert again.built_at == built_image.built_at
    assert sif.stat().st_mtime_ns == mtime


def test_rebuild_after_an_input_changes_is_detected(sif: Path, tmp_path: Path) -> None:
    ca = tmp_path / "extra-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    definition = inputs.definition_path("debootstrap")
    args = build.digested_args({}, COMPRESSION)
    base = inputs.inputs_digest(definition, inputs.REPO, None, args)
    with_ca = inputs.inputs_digest(definition, inputs.REPO, ca, args)
    mirror = {**args, "MIRROR": "http://mirror.example/debian"}
    with_arg = inputs.inputs_digest(definition, inputs.REPO, None, mirror)
    gzip = inputs.inputs_digest(definition, inputs.REPO, None, build.digested_args({}, "gzip"))
    assert len({base, with_ca, with_arg, gzip}) == 4
    assert manifest.load_manifest(sif) is not None
    assert manifest.load_manifest(sif).inputs_sha256 == base  # type: ignore[union-attr]


def test_image_is_lean(sif: Path, run_user: str | None) -> None:
    """No compilers, no pip/apt caches, but compiled bytecode kept (read-only SIF)."""
    probe = (
        "import glob, os, shutil, json;"
        "print(json.dumps({'cc': [c for c in ('gcc','cc','g++','clang') if shutil.which(c)],"
        "'pip_cache': os.path.exists('/root/.cache/pip'),"
        "'apt_lists': len(glob.glob('/var/lib/apt/lists/*_Packages')),"
        "'build_ctx': os.path.exists('/opt/syndeo-build'),"
        "'ray_pyc': len(glob.glob('/opt/syndeo/lib/python3*/site-packages/ray/__pycache__/*'))}))"
    )
    argv = ["apptainer", "exec", "--containall", "--cleanenv", str(sif), "python", "-c", probe]
    if run_user:
        argv = ["runuser", "-u", run_user, "--", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["cc"] == []
    assert facts["pip_cache"] is False
    assert facts["apt_lists"] == 0
    assert facts["build_ctx"] is False
    assert facts["ray_pyc"] > 10


def test_every_clouds_node_sign_in_imports_in_the_image(sif: Path, run_user: str | None) -> None:
    """What a node on each cloud signs in with, present in the image it runs: boto3's
    instance-profile provider (AWS), google-auth's metadata-server credentials (GCP),
    azure-identity's managed identity (Azure), and the rendezvous backends that use them
    (constructed offline: no credential here asks the network until it is used)."""
    probe = (
        "import botocore.credentials, google.auth.compute_engine, json;"
        "from azure.identity import DefaultAzureCredential, ManagedIdentityCredential;"
        "import syndeo.rendezvous.s3, syndeo.rendezvous.gs, syndeo.rendezvous.az;"
        "ManagedIdentityCredential(); google.auth.compute_engine.Credentials();"
        "print(json.dumps([botocore.credentials.InstanceMetadataProvider.METHOD]))"
    )
    argv = ["apptainer", "exec", "--containall", "--cleanenv", str(sif), "python", "-c", probe]
    if run_user:
        argv = ["runuser", "-u", run_user, "--", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["iam-role"]


def test_invoke_build_again_is_a_noop_and_image_verify_passes(
    built_image: manifest.ImageManifest, sif: Path
) -> None:
    """The docs' `invoke build` (cached; docs/how-it-works.md, The image) and
    `invoke image.verify`, as a user runs them."""
    invoke = [sys.executable, "-m", "invoke", "-r", str(inputs.REPO)]
    mtime = sif.stat().st_mtime_ns
    again = subprocess.run(
        [*invoke, "build", "--output", str(sif), "--compression", COMPRESSION],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip().endswith(sif.name) and sif.stat().st_mtime_ns == mtime
    verify = subprocess.run(
        [*invoke, "image.verify", "--sif", str(sif)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr[-2000:]
    assert f"sha256:{built_image.sha256}" in verify.stdout
