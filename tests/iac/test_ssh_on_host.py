"""terraform/ssh reaches its hosts without leaving a script on them.

Terraform's remote-exec uploads each script to ``/tmp/terraform_<n>.sh`` on the host,
``chmod 0777`` before it runs and blanked only after a successful run: the start
script (the node's environment, bucket credentials included) stayed there when a start
failed, and another user of the host could rewrite any script before it ran.  The
module uses ``on-host.sh`` instead, which pipes the script to ``sh -s`` over ssh.

Here, offline: the module has no remote-exec left, and ``on-host.sh`` hands the script
to ssh on standard input only (never in argv, which ``ps`` shows every user), with the
host key pinned and the connection retried as the old connection timeout did.  The
SSH bed runs it for real (``tests/ssh/test_deploy.py::
test_a_failing_start_leaves_nothing_another_user_can_read_or_write``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from syndeo.image.inputs import REPO

MODULE = REPO / "terraform" / "ssh"
ON_HOST = MODULE / "on-host.sh"
SECRET = "AWS_SECRET_ACCESS_KEY=not-in-argv-0123456789"


def test_the_ssh_module_runs_no_remote_exec() -> None:
    for tf in MODULE.glob("*.tf"):
        code = "\n".join(ln.split("#", 1)[0] for ln in tf.read_text().splitlines())
        assert not re.search(r'provisioner\s+"(remote-exec|file)"', code), tf
    main = (MODULE / "main.tf").read_text()
    # reach, start and (destroy-time) stop all go through on-host.sh.
    assert main.count('command = "${path.module}/on-host.sh"') == 3


def _fake_ssh(bin_dir: Path, log: Path, rc: int = 0, fail_first: int = 0) -> None:
    """An ``ssh`` that records its argv, its stdin and the known_hosts file it was given."""
    bin_dir.mkdir()
    script = bin_dir / "ssh"
    script.write_text(
        "#!/bin/sh\n"
        f'log="{log}"\n'
        'n=$(cat "$log.count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$log.count"\n'
        f'if [ "$n" -le {fail_first} ]; then exit 255; fi\n'
        'printf "%s\\n" "$@" > "$log.argv"\n'
        'for a in "$@"; do case "$a" in UserKnownHostsFile=*) '
        'cat "${a#UserKnownHostsFile=}" > "$log.known";; esac; done\n'
        'cat > "$log.stdin"\n'
        f"exit {rc}\n"
    )
    script.chmod(0o755)


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "HOST": "10.98.0.11",
        "HOST_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake",
        "SSH_USER": "me",
        "SSH_PORT": "22",
        "SSH_KEY": "",
        "SSH_CONNECT_TIME": "5",
        "SCRIPT": f"set -eu\nprintf '%s' '{SECRET}' > \"$d/node.env\"\n",
        "TMPDIR": str(tmp_path),
    }
    return subprocess.run(
        ["sh", str(ON_HOST)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_script_travels_on_stdin_and_the_host_key_is_pinned(tmp_path: Path) -> None:
    log = tmp_path / "ssh"
    _fake_ssh(tmp_path / "bin", log)
    out = _run(tmp_path, SSH_KEY="/keys/id", SSH_PORT="2222")
    assert out.returncode == 0, out.stderr
    argv = log.with_suffix(".argv").read_text().splitlines()
    assert SECRET in log.with_suffix(".stdin").read_text()
    assert not any("not-in-argv" in a for a in argv), argv
    assert argv[-2:] == ["me@10.98.0.11", "exec sh -s"]
    for opt in (
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        "GlobalKnownHostsFile=/dev/null",
        "IdentitiesOnly=yes",
    ):
        assert opt in argv, argv
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/keys/id"
    # Only this host's own key is accepted, as the connection's host_key was.
    known = log.with_suffix(".known").read_text()
    assert known == "[10.98.0.11]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake\n"
    # The temporary known_hosts file is gone.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tmp.")]


def test_a_failing_script_fails_and_is_not_retried(tmp_path: Path) -> None:
    log = tmp_path / "ssh"
    _fake_ssh(tmp_path / "bin", log, rc=3)
    out = _run(tmp_path, RETRY_S="30")
    assert out.returncode == 3
    assert "the script on 10.98.0.11 failed (exit 3)" in out.stderr
    assert log.with_suffix(".count").read_text().strip() == "1"


def test_an_unreachable_host_is_retried_until_its_timeout(tmp_path: Path) -> None:
    log = tmp_path / "ssh"
    _fake_ssh(tmp_path / "bin", log, fail_first=2)
    assert _run(tmp_path, RETRY_S="30").returncode == 0
    assert log.with_suffix(".count").read_text().strip() == "3"
    # Without RETRY_S (start, stop): one attempt, ssh's 255 reported as is.
    os.unlink(log.with_suffix(".count"))
    assert _run(tmp_path).returncode == 255
