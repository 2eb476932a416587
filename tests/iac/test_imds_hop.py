"""Why terraform/aws sets the IMDS hop limit to 1: the node runs in Apptainer in the
host's network namespace, so its metadata requests leave from the host's own stack and
cross no extra hop (a container behind a bridge, like Docker's default, would need 2).

Measured with the real apptainer, run the way the start script runs it
(``apptainer exec --containall --cleanenv``, unprivileged), on a minimal sandbox (the
question depends on apptainer's flags, not on the image's contents).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbeds.users import as_user
from tests.support import hcl

START_SCRIPT = hcl.TERRAFORM / "modules" / "node" / "files" / "syndeo-node"
pytestmark = pytest.mark.apptainer


def _exec_flags() -> list[str]:
    """The fixed flags of the start script's `apptainer exec` line (after the GPU rule's
    optional `--nv` array, before the bind array)."""
    m = re.search(
        r"^exec apptainer exec (?:\$\{nv\S+ )?((?:--[a-z-]+ )+)", START_SCRIPT.read_text(), re.M
    )
    assert m, f"no `exec apptainer exec --...` line in {START_SCRIPT}"
    return m.group(1).split()


def _sandbox(root: Path) -> Path:
    """A directory image holding just `readlink` and its libraries."""
    box = root / "box"
    for d in ("bin", "proc", "sys", "dev", "etc", "tmp", "var/tmp", "root", "home"):
        (box / d).mkdir(parents=True)
    (box / "etc" / "passwd").touch()
    (box / "etc" / "group").touch()
    exe = shutil.which("readlink")
    assert exe
    shutil.copy(exe, box / "bin" / "readlink")
    libs = re.findall(
        r"(/\S+\.so[.\d]*)",
        subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout,
    )
    for lib in libs:
        dest = box / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.realpath(lib), dest)
    for p in [root, *box.rglob("*")]:
        p.chmod(0o755)  # the dynamic loader must be executable too
    return box


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory the CI user can traverse (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="syndeo-imds-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_node_container_shares_the_host_network_namespace(public_dir: Path) -> None:
    assert shutil.which("apptainer"), "apptainer missing: run scripts/setup --all"
    flags = _exec_flags()
    assert not {"--net", "--network"} & set(flags), f"the start script adds {flags}"
    box = _sandbox(public_dir)
    host = subprocess.run(
        as_user(["readlink", "/proc/self/ns/net"]), capture_output=True, text=True, check=True
    ).stdout.strip()
    inside = subprocess.run(
        as_user(["apptainer", "exec", *flags, str(box), "/bin/readlink", "/proc/self/ns/net"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert inside.returncode == 0, inside.stderr
    assert host.startswith("net:[")
    assert inside.stdout.strip() == host


def test_aws_hop_limit_is_one() -> None:
    text = (hcl.TERRAFORM / "aws" / "instances.tf").read_text()
    assert re.search(r"http_put_response_hop_limit\s*=\s*1\b", text)
    assert re.search(r'http_tokens\s*=\s*"required"', text)
