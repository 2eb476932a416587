"""Run a ``#cloud-config`` document on a test-bed machine the way cloud-init and
systemd would on a packer/cloud VM -- faithfully, but only for what the node module
emits.  One implementation for every bed that stands in for a VM: an SSH-bed host
(:class:`SshMachine`, reached over real ssh) and an emulated EC2 instance
(``testbeds.awsemu``, reached with nsenter).

Understood: ``write_files`` entries (``path``, ``content``, ``permissions``,
``owner``) for files a known unit reads, and ``runcmd`` entries
``[systemctl, start, [--no-block,] <unit>]`` for units loaded from their unit files
(packer/cloud/files/*.service).  Anything else in the document is refused with
:class:`Unsupported`, so a directive added to the user-data later cannot be skipped
silently here while cloud-init would act on it.

Where the bed differs from a VM (the test user is not root on the machines):

- every VM path ``/p`` lives at ``<HOST_DISK>/vm/p`` on the host's private disk
  (what the image bake put there, and what cloud-init writes);
- files are owned by the bed's user, who stands in for the unit's ``User=``
  (on a VM the environment file is root's: systemd reads ``EnvironmentFile=`` as
  root before dropping privileges; here the start script reads it as the node
  user, so it must be theirs);
- ``ExecStart`` gets the environment file as its argument: the start script's
  documented equivalent of ``EnvironmentFile=`` for the node module's format
  (``set -a; . FILE``; tests/iac/test_node_module.py reads it back both ways).

Starting does what systemd does for ``Type=simple``: the ExecStart process runs
in its own session with a clean environment (systemd's PATH, the user's HOME,
USER, LOGNAME, SHELL; cwd ``/``), output to a log file standing in for the
journal; its pid (= process group) is recorded.  Stopping does what ``systemctl
stop`` does with ``KillMode=mixed``: TERM to the main process, wait for the whole
group to go (at most ``TimeoutStopSec``), then KILL the group.  Every command on
the machine runs as the bed's user, through :attr:`Machine.shell`.
"""

from __future__ import annotations

import configparser
import os
import pwd
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import yaml  # type: ignore[import-untyped]

from testbeds import sshhosts

# systemd's default PATH for services (systemd.exec(5), "Environment variables in
# spawned processes").
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VM_DIR = "vm"  # under the host's disk: the VM's file system root
RUN_DIR = "/run/syndeo-test-units"  # VM path of the runner's per-unit state (pid, log)
WRITE_FILES_KEYS = {"path", "content", "permissions", "owner"}


class Unsupported(AssertionError):
    """The document asks for something this runner does not do (the test must fail)."""


@dataclass(frozen=True)
class Unit:
    """The parts of a systemd service unit this runner honours (others are refused)."""

    name: str
    exec_start: str
    environment_file: str
    user: str
    timeout_stop_s: float
    condition_path_exists: str | None
    # ExecStopPost without systemd's "+" (root for that command): the bed runs every
    # command as its user.  None: the unit has none.
    exec_stop_post: str | None = None

    @classmethod
    def load(cls, path: Path) -> Unit:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # case-sensitive keys
        parser.read_string(path.read_text())
        svc = parser["Service"]
        if svc.get("Type", "simple") != "simple":
            raise Unsupported(f"{path.name}: only Type=simple is emulated")
        if svc.get("KillMode") != "mixed":
            raise Unsupported(f"{path.name}: only KillMode=mixed is emulated")
        if svc.get("Restart", "no") != "no":
            raise Unsupported(f"{path.name}: Restart= is not emulated")
        exec_start = svc["ExecStart"]
        if not exec_start.startswith("/") or len(exec_start.split()) != 1:
            raise Unsupported(f"{path.name}: ExecStart must be one absolute path, no arguments")
        env_file = svc["EnvironmentFile"]
        if env_file.startswith("-"):
            raise Unsupported(f"{path.name}: optional EnvironmentFile= is not emulated")
        post = svc.get("ExecStopPost")
        if post is not None:
            post = post.removeprefix("+")
            if not post.startswith("/") or len(post.split()) != 1:
                raise Unsupported(f"{path.name}: ExecStopPost must be one absolute path")
        extra = set(svc) - {
            "ExecStopPost",
            "Type",
            "User",
            "Group",
            "EnvironmentFile",
            "ExecStart",
            "KillMode",
            "TimeoutStopSec",
            "Restart",
        }
        if extra:
            raise Unsupported(f"{path.name}: [Service] {sorted(extra)} not emulated")
        return cls(
            name=path.stem,
            exec_start=exec_start,
            environment_file=env_file,
            user=svc["User"],
            timeout_stop_s=float(svc.get("TimeoutStopSec", "90")),
            condition_path_exists=parser["Unit"].get("ConditionPathExists"),
            exec_stop_post=post,
        )


class Machine(Protocol):
    """A test-bed machine standing in for a VM: its name, the unprivileged user who
    stands in for the unit's ``User=``, its private disk (mounted at
    :data:`sshhosts.HOST_DISK` inside it), and a shell on it as that user."""

    @property
    def name(self) -> str: ...

    @property
    def user(self) -> str: ...

    @property
    def disk(self) -> Path: ...

    def shell(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]: ...


@dataclass(frozen=True)
class SshMachine:
    """An SSH-bed host, reached over real ssh as the bed's user."""

    bed: sshhosts.Bed
    host: sshhosts.SshHost

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def user(self) -> str:
        return self.bed.user

    @property
    def disk(self) -> Path:
        return self.bed.disk(self.host)

    def shell(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return sshhosts.ssh(self.bed, self.host, command, timeout=timeout)


@dataclass
class VmHost:
    """One bed machine seen as a VM booted from the packer/cloud image."""

    machine: Machine
    units: dict[str, Unit]
    started: dict[str, int] = field(default_factory=dict)  # unit -> main pid (= pgid)
    written: list[str] = field(default_factory=list)  # VM paths cloud-init wrote
    # Where `poweroff` resolves on this machine when it is the bed's own (a power button
    # of its hypervisor, testbeds.awsemu); None: a unit's ExecStopPost, which may power
    # the machine off, is not run here (an SSH-bed host shares this machine's own).
    poweroff: str | None = None

    # ------------------------------------------------------------------ paths
    def inside(self, vm_path: str) -> str:
        """Where the VM path is, as the host's processes see it."""
        rel = PurePosixPath(vm_path).relative_to("/")
        return str(sshhosts.HOST_DISK / VM_DIR / rel)

    def outside(self, vm_path: str) -> Path:
        """Where the VM path is, seen from this machine."""
        return self.machine.disk / VM_DIR / PurePosixPath(vm_path).relative_to("/")

    def _owned_file(self, vm_path: str, data: bytes | Path, mode: int) -> None:
        pw = pwd.getpwnam(self.machine.user)
        path = self.outside(vm_path)
        top = self.machine.disk / VM_DIR
        path.parent.mkdir(parents=True, exist_ok=True)
        for d in [path.parent, *path.parent.parents]:
            if d == top.parent:
                break
            shutil.chown(d, pw.pw_uid, pw.pw_gid)
        if isinstance(data, Path):
            shutil.copyfile(data, path)
        else:
            path.write_bytes(data)
        shutil.chown(path, pw.pw_uid, pw.pw_gid)
        path.chmod(mode)

    def bake(self, vm_path: str, source: Path, mode: int) -> None:
        """Install a file as the image build would (the SIF, the start script)."""
        self._owned_file(vm_path, source, mode)

    def forget_boot(self) -> None:
        """Remove what the last boot wrote (cloud-init's files, the units' logs): the
        next document runs on a host as fresh as a new VM of the same image."""
        for path in self.written:
            self.outside(path).unlink(missing_ok=True)
        self.written.clear()
        shutil.rmtree(self.outside(RUN_DIR), ignore_errors=True)

    def wipe(self) -> None:
        shutil.rmtree(self.machine.disk / VM_DIR, ignore_errors=True)

    def sh(self, command: str, timeout: float = 60.0) -> str:
        res = self.machine.shell(command, timeout)
        if res.returncode != 0:
            raise AssertionError(
                f"{self.machine.name}: `{command[:200]}` failed ({res.returncode}): "
                f"{res.stderr.strip()[-2000:]}"
            )
        return res.stdout

    # ------------------------------------------------------------------ cloud-init
    def run_user_data(self, text: str) -> None:
        """What cloud-init does with the document at first boot (see module doc)."""
        doc = parse(text)
        # cloud-init writes files in its init stage and runs runcmd in the final one.
        for entry in doc.get("write_files", []):
            self._write_file(entry)
        for cmd in doc.get("runcmd", []):
            self._runcmd(cmd)

    def _write_file(self, entry: Any) -> None:
        if not isinstance(entry, dict) or not set(entry) <= WRITE_FILES_KEYS:
            raise Unsupported(f"write_files entry not emulated: {entry!r}")
        path = str(entry.get("path"))
        readers = [u for u in self.units.values() if u.environment_file == path]
        if not readers:
            # Only files a known unit reads: any other file would have an effect on a
            # VM that this runner cannot reproduce.
            raise Unsupported(f"write_files {path!r}: no emulated unit reads it")
        if entry.get("owner", "root:root") != "root:root":
            raise Unsupported(f"write_files {path!r}: owner {entry['owner']!r} not emulated")
        content = entry.get("content", "")
        if not isinstance(content, str):
            raise Unsupported(f"write_files {path!r}: content must be text")
        mode = int(str(entry.get("permissions", "0644")), 8)
        self._owned_file(path, content.encode(), mode)
        self.written.append(path)

    def _runcmd(self, cmd: Any) -> None:
        if not isinstance(cmd, list) or not all(isinstance(c, str) for c in cmd):
            raise Unsupported(f"runcmd entry not emulated (shell string?): {cmd!r}")
        if cmd[:2] != ["systemctl", "start"]:
            raise Unsupported(f"runcmd entry not emulated: {cmd!r}")
        rest = cmd[2:]
        if rest[:1] == ["--no-block"]:
            rest = rest[1:]
        if len(rest) != 1 or rest[0].removesuffix(".service") not in self.units:
            raise Unsupported(f"runcmd {cmd!r}: not one unit this runner knows")
        self.start(rest[0].removesuffix(".service"))

    # ------------------------------------------------------------------ systemd
    def start(self, name: str) -> int:
        """``systemctl start name``: returns the main pid (also its process group)."""
        unit = self.units[name]
        if name in self.started and self.is_active(name):
            return self.started[name]  # starting an active unit does nothing
        cond = unit.condition_path_exists
        if cond is not None and not self.outside(cond).exists():
            raise AssertionError(f"{self.machine.name}: {name}: ConditionPathExists={cond} failed")
        pw = pwd.getpwnam(self.machine.user)
        env = {
            "PATH": SYSTEMD_PATH,
            "HOME": pw.pw_dir,
            "USER": pw.pw_name,
            "LOGNAME": pw.pw_name,
            "SHELL": pw.pw_shell,
            "LANG": "C.UTF-8",
        }
        run = self.inside(f"{RUN_DIR}/{name}")
        main = shlex.join(
            [
                "env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                self.inside(unit.exec_start),
                self.inside(unit.environment_file),
            ]
        )
        # Own session: the group is what stop signals.  exec keeps the pid.
        start = (
            f"setsid sh -c {shlex.quote('echo $$ > main.pid; cd /; exec ' + main)}"
            " > unit.log 2>&1 < /dev/null &"
        )
        script = "\n".join(
            [
                "set -eu",
                f"d={shlex.quote(run)}",
                'mkdir -p "$d" && cd "$d" && rm -f main.pid',
                start if unit.exec_stop_post is None else self._supervised(unit, start),
                "i=0",
                # Up to 60 s: a loaded machine may take a while to fork the unit (an event, polled).
                "while [ ! -s main.pid ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done",
                "cat main.pid",
            ]
        )
        pid = int(self.sh(script).strip())
        self.started[name] = pid
        return pid

    def _supervised(self, unit: Unit, start: str) -> str:
        """``start`` and, once its main process has ended, the unit's ExecStopPost as
        systemd runs it: EXIT_CODE ``exited`` or ``killed`` and EXIT_STATUS the status
        or the signal's name, systemd's PATH, output to the journal (the unit's log).  A
        subshell outside the unit's group waits for it (only a parent has the status)."""
        assert unit.exec_stop_post is not None
        post = shlex.join(["env", "-i", f"PATH={SYSTEMD_PATH}", "LANG=C.UTF-8"])
        post += ' EXIT_CODE="$c" EXIT_STATUS="$s" ' + shlex.quote(self.inside(unit.exec_stop_post))
        found = f'"$(PATH={SYSTEMD_PATH} command -v poweroff)"'
        run_post = (
            f"if [ {found} = {shlex.quote(self.poweroff or '')} ]; then {post}; "
            "else echo 'bed: ExecStopPost not run (this poweroff is not the bed one)'; fi"
            if self.poweroff is not None
            else "echo 'bed: ExecStopPost not run on this machine'"
        )
        return "\n".join(
            [
                "(",
                "  " + start,
                '  m=$!; s=0; wait "$m" || s=$?; c=exited',
                '  if [ "$s" -gt 128 ]; then c=killed; s=$(kill -l $((s - 128))); fi',
                f"  {run_post}",
                ") >> unit.log 2>&1 < /dev/null &",
            ]
        )

    def is_active(self, name: str) -> bool:
        """Whether any process of the unit's group is left (the bed's machines share
        this machine's PID namespace, so this needs no round trip)."""
        try:
            os.killpg(self.started[name], 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self, name: str) -> None:
        """``systemctl stop name`` with KillMode=mixed (see module doc)."""
        pid = self.started.pop(name, None)
        if pid is None:
            return
        ticks = int(self.units[name].timeout_stop_s * 10)
        self.sh(
            "\n".join(
                [
                    f"pg={pid}",
                    'kill -TERM "$pg" 2>/dev/null || true',
                    "i=0",
                    f'while kill -0 -- "-$pg" 2>/dev/null && [ $i -lt {ticks} ]; do',
                    "  sleep 0.1; i=$((i + 1))",
                    "done",
                    'kill -KILL -- "-$pg" 2>/dev/null || true',
                ]
            ),
            timeout=self.units[name].timeout_stop_s + 30,
        )

    def log(self, name: str) -> str:
        """The unit's output (its journal, here)."""
        try:
            return self.outside(f"{RUN_DIR}/{name}/unit.log").read_text(errors="replace")
        except OSError:
            return ""


def parse(text: str) -> dict[str, Any]:
    """The document as a mapping; refuses anything but write_files and runcmd."""
    if not text.startswith("#cloud-config\n"):
        raise Unsupported("user-data is not a #cloud-config document")
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise Unsupported("user-data is not a mapping")
    extra = set(doc) - {"write_files", "runcmd"}
    if extra:
        raise Unsupported(f"cloud-config keys not emulated: {sorted(extra)}")
    return doc
