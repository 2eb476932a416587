"""An emulated AWS on one machine, for running ``invoke deploy --target aws`` whole.

One root daemon (``python -m testbeds.awsemu serve``) is the cloud:

- **the APIs**: moto (EC2, IAM, STS, S3 in one server) in a thread, listening on the
  address of the VPC router of ``terraform/aws``'s default network (10.42.0.1), on a
  bridge this bed owns.  IAM authorization is on: the first requests create an admin
  user whose key ``up`` prints; every later request is checked against the caller's
  policies.  The real AWS provider and boto3 reach it through ``AWS_ENDPOINT_URL``.
- **the image**: an AMI registered at start stands for the Packer-baked image; its
  content is the SIF given to ``up``, which every instance sees at ``/opt/syndeo``
  (where ``packer/cloud/files/provision.sh`` installs it).
- **the hypervisor**: every instance that turns ``running`` in moto becomes a machine:
  a network namespace at its private IP on the bridge, its own hostname (which every
  machine resolves, as the VPC's DNS does: DNS_SUFFIX), mount
  namespace and disk (a private ``/var/tmp``, where nodes keep their scratch, and the
  VM's files), an instance
  metadata service at 169.254.169.254 (:mod:`testbeds.imds`) serving the
  credentials of its instance profile's role from moto's STS, and its user-data run
  as cloud-init + systemd would (:mod:`testbeds.cloudinit`, the same runner
  the SSH-bed tests use).  An instance that is stopped or terminated in moto is
  powered off: SIGKILL to everything in its namespace, no handlers, its disk gone.
- **the power button**: a guest that powers itself off (``poweroff``, from systemd's
  PATH) runs the bed's own ``poweroff``, bind-mounted over ``/usr/local/sbin`` in the
  machine's mount namespace (the host's is never reached from a machine); it leaves a
  mark on the machine's disk, and the hypervisor then stops or terminates the instance
  in moto as its ``instanceInitiatedShutdownBehavior`` says -- and powers it off as
  above.
- **faults a test injects** by writing a file in the bed's dir: ``no-capacity`` (a zone
  that answers RunInstances as EC2 does when it has none, :func:`_moto_as_aws`) and
  ``fail-boot`` (the next instances to boot fail to and power off,
  :meth:`Cloud._failing_boot`).
- **a log of API requests** (``<base>/api-calls.jsonl``, :func:`api_calls`): each EC2,
  IAM and STS request with its action and access key, for what a benchmark counts.

Deviations from EC2, each because moto does not model it: only instances of this
bed's AMI boot (any other image would not run the unit either), only in the
emulator's region and network; bucket policies are evaluated without their
``Condition`` statements (moto ignores conditions and would apply the TLS-only
Deny to every request; the emulator speaks plain HTTP).  Where moto answers
otherwise than AWS in a way Terraform acts on, the emulator corrects it
(:func:`_moto_as_aws`).  See README "Try the AWS target without an account".

Root only.  ``up(base, sif)`` / ``down(base)``; state in ``<base>/state.json``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from syndeo.core.errors import TargetError
from testbeds import cloudinit, imds, netns, sshhosts
from testbeds.procs import pid_alive, run, terminate, wait_until

REGION = "us-east-1"
CALLS = "api-calls.jsonl"  # the bed's log of API requests (_log_calls)
OWN_AGENT = "syndeo-awsemu"  # in the user agent of the emulator's own requests
ADMIN_USER = "syndeo-emulator-admin"  # the emulator's IAM user; every test speaks as it
# terraform/aws's default network_cidr and the address AWS gives the VPC router.
NETWORK = "10.42.0.0/16"
GATEWAY = "10.42.0.1"
PREFIX = 16
IMAGE_DIR = Path("/opt/syndeo")  # where packer/cloud installs the SIF (a mount point here)
MIRROR = Path("/opt/tf-plugins")  # this machine's provider mirror (no registry here)
POLL_S = 0.5
REPO = Path(__file__).resolve().parents[1]
UNIT_FILE = REPO / "packer" / "cloud" / "files" / "syndeo-node.service"
NODE_FILES = REPO / "terraform" / "modules" / "node" / "files"
START_SCRIPT = NODE_FILES / "syndeo-node"
STOPPED_SCRIPT = NODE_FILES / "syndeo-node-stopped"  # the unit's ExecStopPost
# Where a machine finds the bed's `poweroff` (first on systemd's PATH), and the mark it
# leaves on the machine's disk for the hypervisor.
POWEROFF_DIR = "/usr/local/sbin"
# The VPC's DNS as EC2 answers it (enable_dns_hostnames, terraform/aws/network.tf): each
# instance's hostname (ip-A-B-C-D) and its name under DNS_SUFFIX resolve to its private
# IP, from every instance.  The bed keeps one hosts file, bind-mounted over each
# machine's /etc/hosts (Apptainer binds that into the node's container), with a line
# added for each instance as it boots.  A name derives from its IP, so a line never
# changes; the file is appended to, never replaced (a bind mount holds the inode).
DNS_SUFFIX = "ec2.internal"
HOSTS_HEAD = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
POWEROFF_MARK = "powered-off"
SYSTEMD_PATH = cloudinit.SYSTEMD_PATH


class State(BaseModel):
    """What ``up`` started; ``<base>/state.json``."""

    base: Path
    tag: str
    pid: int
    endpoint: str
    region: str = REGION
    access_key_id: str
    secret_access_key: str
    image_id: str
    sif: Path
    cli_config: Path | None = None

    def env(self) -> dict[str, str]:
        """The standard variables a user exports to talk to this emulated AWS."""
        env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
        }
        if self.cli_config is not None:
            env["TF_CLI_CONFIG_FILE"] = str(self.cli_config)
        return env


# --------------------------------------------------------------------------- names
def default_base() -> Path:
    return REPO / ".testbed" / "aws"


def bed_names(base: Path) -> tuple[str, str, str]:
    """(tag, bridge, namespace prefix) of the bed under ``base``."""
    tag = hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:6]
    return tag, f"syaws{tag}", f"syaws{tag}-"


def load(base: Path | None = None) -> State | None:
    try:
        return State.model_validate_json(((base or default_base()) / "state.json").read_text())
    except (OSError, ValueError):
        return None


def _ours(pid: int, base: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"testbeds.awsemu" in cmd and str(base).encode() in cmd


def running(base: Path | None = None) -> State | None:
    """The bed under ``base`` if its emulator runs."""
    base = (base or default_base()).resolve()
    state = load(base)
    return state if state is not None and pid_alive(state.pid) and _ours(state.pid, base) else None


# --------------------------------------------------------------------------- up / down
def up(base: Path | None = None, sif: Path | None = None, timeout: float = 60.0) -> State:
    """Start the emulator under ``base`` (idempotent: a running one is returned)."""
    if os.geteuid() != 0:
        raise TargetError("the emulated AWS needs root (network namespaces): run with sudo")
    base = (base or default_base()).resolve()
    state = running(base)
    if state is not None:
        return state
    if sif is None or not sif.is_file():
        raise TargetError(
            f"the emulated AWS needs the node image: --image PATH.sif (got {sif}); "
            "`invoke build` makes one"
        )
    down(base)
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    log = open(base / "emulator.log", "ab")  # noqa: SIM115  (the daemon's own stdout)
    proc = subprocess.Popen(
        [sys.executable, "-m", "testbeds.awsemu", "serve", str(base), str(sif.resolve())],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    log.close()

    def ready() -> State | None:
        if proc.poll() is not None:
            tail = (base / "emulator.log").read_text(errors="replace")[-1500:]
            raise TargetError(f"the emulated AWS did not start: {tail}")
        found = load(base)
        return found if found is not None and found.pid == proc.pid else None

    try:
        return wait_until(ready, timeout, f"the emulated AWS (log: {base / 'emulator.log'})")
    except BaseException:
        down(base)
        raise


def down(base: Path | None = None) -> None:
    """Power off every instance, stop the APIs, remove what the bed made.  Safe to repeat."""
    if os.geteuid() != 0:
        raise TargetError("the emulated AWS needs root: run with sudo")
    base = (base or default_base()).resolve()
    state = load(base)
    if state is not None and pid_alive(state.pid) and _ours(state.pid, base):
        terminate([state.pid], grace=30)
    _clear(base)
    shutil.rmtree(base, ignore_errors=True)


def _daemons(base: Path) -> list[int]:
    """Every emulator daemon of ``base`` still running, whatever state.json says (one
    whose state file was replaced or removed must not outlive ``down``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _ours(int(entry.name), base):
            found.append(int(entry.name))
    return found


def _clear(base: Path) -> None:
    """Whatever of the bed is left (a daemon that was killed cleans nothing)."""
    terminate(_daemons(base), grace=30)
    tag, bridge, prefix = bed_names(base)
    spaces = netns.list_netns(prefix)
    terminate(sorted({p for ns in spaces for p in netns.netns_pids(ns)}), grace=0)
    for ns in spaces:
        netns.node_down(ns, _veth(tag, ns.removeprefix(prefix)))
    netns.bridge_down(bridge)


def logs(base: Path | None = None, tail: int = 4000) -> str:
    """The emulator's log and every machine's unit output so far (for failure messages)."""
    base = (base or default_base()).resolve()
    parts = []
    for path in [
        base / "emulator.log",
        *sorted((base / "logs").glob("*.log")),
        *sorted((base / "instances").glob("*/disk/vm/run/*/*/unit.log")),
    ]:
        with contextlib.suppress(OSError):
            parts.append(
                f"--- {path.relative_to(base)}:\n{path.read_text(errors='replace')[-tail:]}"
            )
    return "\n".join(parts)


def leftovers(base: Path | None = None) -> list[str]:
    base = (base or default_base()).resolve()
    _, bridge, prefix = bed_names(base)
    found = [f"netns {ns}" for ns in netns.list_netns(prefix)]
    if netns.link_exists(bridge):
        found.append(f"link {bridge}")
    found += [f"process {pid}" for pid in _daemons(base)]
    return found


def _veth(tag: str, n: str) -> str:
    return netns.check_ifname(f"sya{tag}i{n}")


# --------------------------------------------------------------------------- machines
def machine(instance_id: str, base: Path | None = None) -> InstanceMachine | None:
    """The running machine of ``instance_id`` (None: not booted, or powered off)."""
    path = (base or default_base()).resolve() / "instances" / instance_id / "machine.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    m = InstanceMachine(data["name"], data["user"], Path(data["disk"]), int(data["holder"]))
    return m if pid_alive(m.holder) else None


@dataclasses.dataclass
class InstanceMachine:
    """An instance's machine, reached with nsenter (implements cloudinit.Machine)."""

    name: str
    user: str
    disk: Path
    holder: int  # the process that holds its UTS and mount namespaces

    def shell(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        pw = pwd.getpwnam(self.user)
        env = {"HOME": pw.pw_dir, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        argv = [
            "nsenter",
            "-t",
            str(self.holder),
            "-n",
            "-m",
            "-u",
            "--",
            "runuser",
            "-u",
            self.user,
            "--",
            "env",
            "-i",
            *(f"{k}={v}" for k, v in env.items()),
            "sh",
            "-c",
            command,
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


@dataclasses.dataclass
class Host:
    instance_id: str
    ip: str
    netns: str
    veth: str
    machine: InstanceMachine | None = None
    vm: cloudinit.VmHost | None = None
    server: Any = None
    meta: imds.Instance | None = None


class Cloud:
    """The daemon: moto, and a machine for every running instance of our AMI."""

    def __init__(self, base: Path, sif: Path) -> None:
        self.base, self.sif = base, sif
        self.tag, self.bridge, self.prefix = bed_names(base)
        self.hosts: dict[str, Host] = {}
        self.failed: set[str] = set()
        self.counter = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.user = sshhosts.CI_USER  # stands in for the image's `syndeo` service user
        self.unit = cloudinit.Unit.load(UNIT_FILE)

    # ------------------------------------------------------------------ start
    def start(self) -> State:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        _moto_as_aws(self.base)
        _log_calls(self.base / CALLS)
        if Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() != "0":
            # The instances' default route leads to this machine: it must not pass
            # their packets on (nothing of the bed may reach another address).
            raise TargetError(
                "IP forwarding is on (net.ipv4.ip_forward=1): the emulated instances could "
                "reach past this machine; turn it off or run the emulator elsewhere"
            )
        used = netns.subnet_in_use(NETWORK, except_dev=self.bridge)
        if used is not None:
            raise TargetError(f"{NETWORK} is already used by {used}: the emulated AWS needs it")
        netns.bridge_up(self.bridge, GATEWAY, PREFIX)
        IMAGE_DIR.mkdir(parents=True, exist_ok=True)  # an empty mount point, left in place
        # What the image holds at /opt/syndeo: the SIF (bind-mounted into each machine
        # over this placeholder: 270 MB are not copied per instance) and its manifest.
        image = self.base / "image"
        image.mkdir(exist_ok=True)
        (image / "syndeo.sif").touch()
        manifest = self.sif.with_name(self.sif.name + ".manifest.json")
        if manifest.exists():
            shutil.copyfile(manifest, image / "syndeo.sif.manifest.json")
        self._power_button()
        hosts = self.base / "hosts"
        hosts.write_text(HOSTS_HEAD)
        os.chmod(hosts, 0o644)
        self.server = ThreadedMotoServer(ip_address=GATEWAY, port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        key, secret = self._admin()
        self.admin = {"aws_access_key_id": key, "aws_secret_access_key": secret}
        ec2 = self.client("ec2")
        # Tagged as packer/cloud tags an AMI: with the digest of the SIF it carries.
        digest = _sif_digest(self.sif)
        self.image_id = ec2.register_image(
            Name=f"syndeo-node-{(digest or 'unknown')[:12]}",
            Description=f"Syndeo node image: {self.sif}",
            Architecture="x86_64",
            RootDeviceName="/dev/xvda",
            VirtualizationType="hvm",
            BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 30}}],
        )["ImageId"]
        ec2.create_tags(
            Resources=[self.image_id],
            Tags=[
                {"Key": "project", "Value": "syndeo"},
                {"Key": "syndeo-image-digest", "Value": digest or ""},
            ],
        )
        state = State(
            base=self.base,
            tag=self.tag,
            pid=os.getpid(),
            endpoint=self.endpoint,
            access_key_id=key,
            secret_access_key=secret,
            image_id=self.image_id,
            sif=self.sif,
            cli_config=self._cli_config(),
        )
        tmp = self.base / "state.json.tmp"
        tmp.write_text(state.model_dump_json(indent=2))
        os.chmod(tmp, 0o644)
        tmp.replace(self.base / "state.json")
        return state

    def _power_button(self) -> None:
        """The bed's ``poweroff``: what a guest's power-off does here (module doc)."""
        sbin = self.base / "sbin"
        sbin.mkdir(exist_ok=True)
        os.chmod(sbin, 0o755)
        script = sbin / "poweroff"
        mark = shlex.quote(str(sshhosts.HOST_DISK / POWEROFF_MARK))
        script.write_text(
            "#!/bin/sh\n"
            "# The emulated AWS's power button (testbeds/awsemu.py): the hypervisor sees\n"
            "# the mark and stops the instance in moto.  Never the host's poweroff.\n"
            f"date +%s > {mark}\n"
        )
        os.chmod(script, 0o755)

    def _admin(self) -> tuple[str, str]:
        """The admin user, made in moto's unauthenticated window (3 requests)."""
        import boto3

        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName=ADMIN_USER)
        iam.put_user_policy(
            UserName=ADMIN_USER,
            PolicyName="admin",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        k = iam.create_access_key(UserName=ADMIN_USER)["AccessKey"]
        return k["AccessKeyId"], k["SecretAccessKey"]

    def _cli_config(self) -> Path | None:
        """Terraform CLI config taking hashicorp providers from this machine's mirror
        (no registry is reachable here), with a plugin cache so that each cluster's
        init links the provider instead of copying it."""
        if not MIRROR.is_dir():
            return None
        cache = self.base / "plugin-cache"
        cache.mkdir(exist_ok=True)
        os.chmod(cache, 0o777)  # shared by whoever deploys against this emulator
        path = self.base / "terraformrc"
        path.write_text(
            f'plugin_cache_dir = "{cache}"\n'
            "provider_installation {\n"
            f'  filesystem_mirror {{\n    path    = "{MIRROR}"\n'
            '    include = ["registry.terraform.io/hashicorp/*"]\n  }\n'
            '  direct {\n    exclude = ["registry.terraform.io/hashicorp/*"]\n  }\n}\n'
        )
        os.chmod(path, 0o644)
        return path

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            config=Config(user_agent_extra=OWN_AGENT),  # left out of the request log
            **self.admin,
        )

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        ec2 = self.client("ec2")
        while not self.stopping.is_set():
            try:
                seen = {
                    i["InstanceId"]: i
                    for r in ec2.describe_instances()["Reservations"]
                    for i in r["Instances"]
                }
            except Exception as exc:  # the loop outlives a moto hiccup
                _log(f"describe_instances failed: {exc}")
                self.stopping.wait(POLL_S)
                continue
            for iid, inst in seen.items():
                state = inst["State"]["Name"]
                if state == "running" and iid not in self.hosts and iid not in self.failed:
                    if inst.get("ImageId") != self.image_id:
                        _log(f"{iid}: image {inst.get('ImageId')} is not this bed's: not booted")
                        self.failed.add(iid)
                        continue
                    ip = inst.get("PrivateIpAddress", "")
                    if any(h.ip == ip for h in self.hosts.values()):
                        continue  # its address is still being powered off
                    self._boot(iid, inst)
                elif state != "running" and iid in self.hosts:
                    self.power_off(iid)
            for iid in [i for i in self.hosts if i not in seen]:
                self.power_off(iid)
            self._guest_shutdowns(ec2)
            self._notices()
            self.stopping.wait(POLL_S)

    def _guest_shutdowns(self, ec2: Any) -> None:
        """Instances whose guest powered itself off: stopped or terminated in moto, as
        their instanceInitiatedShutdownBehavior says (EC2's rule for a shutdown from
        the OS); the next turn of the loop powers the machine off."""
        for iid in list(self.hosts):
            mark = self.base / "instances" / iid / "disk" / POWEROFF_MARK
            if not mark.exists():
                continue
            try:
                attr = ec2.describe_instance_attribute(
                    InstanceId=iid, Attribute="instanceInitiatedShutdownBehavior"
                )
                how = attr["InstanceInitiatedShutdownBehavior"]["Value"]
                if how == "terminate":
                    ec2.terminate_instances(InstanceIds=[iid])
                else:
                    ec2.stop_instances(InstanceIds=[iid])
            except Exception as exc:  # the loop outlives a moto hiccup: next turn
                _log(f"{iid}: the guest powered off, but moto refused: {exc}")
                continue
            mark.unlink(missing_ok=True)
            _log(f"{iid}: the guest powered off: {how}")

    def _notices(self) -> None:
        """Spot interruption notices dropped by tests: ``<base>/notices/<instance-id>``."""
        folder = self.base / "notices"
        if not folder.is_dir():
            return
        for path in folder.iterdir():
            host = self.hosts.get(path.name)
            if host is not None and host.meta is not None and host.meta.spot_action is None:
                with contextlib.suppress(OSError, ValueError):
                    host.meta.spot_action = json.loads(path.read_text())

    # ------------------------------------------------------------------ power
    def _boot(self, iid: str, inst: dict[str, Any]) -> None:
        with self.lock:
            self.counter += 1
            n = str(self.counter)
        host = Host(iid, inst["PrivateIpAddress"], f"{self.prefix}{n}", _veth(self.tag, n))
        self.hosts[iid] = host
        threading.Thread(target=self._boot_host, args=(host, inst), daemon=True).start()

    def _boot_host(self, host: Host, inst: dict[str, Any]) -> None:
        try:
            self._prepare(host, inst)
            assert host.vm is not None
            if (after := self._failing_boot()) is not None:
                self._fail_boot(host, after)
                return
            attr = self.client("ec2").describe_instance_attribute(
                InstanceId=host.instance_id, Attribute="userData"
            )
            data = attr.get("UserData", {}).get("Value")
            if data:  # cloud-init's first boot
                host.vm.run_user_data(base64.b64decode(data).decode())
            _log(f"{host.instance_id}: booted at {host.ip}")
        except Exception as exc:
            _log(f"{host.instance_id}: boot failed: {type(exc).__name__}: {exc}")
            self.failed.add(host.instance_id)

    def _failing_boot(self) -> float | None:
        """A fault a test injects: ``<base>/fail-boot`` holds "N SECONDS", and the next N
        instances to boot fail to: each runs none of its user-data and its guest powers
        off SECONDS after it turned running (late enough that Terraform has seen it
        running and its apply has returned).  None: this boot is not one of them."""
        path = self.base / "fail-boot"
        with self.lock:
            try:
                count, seconds = path.read_text().split()
            except (OSError, ValueError):
                return None
            if int(count) <= 0:
                return None
            path.write_text(f"{int(count) - 1} {seconds}\n")
        return float(seconds)

    def _fail_boot(self, host: Host, after: float) -> None:
        _log(f"{host.instance_id}: its boot fails (injected): powers off in {after:.0f} s")
        time.sleep(after)
        mark = self.base / "instances" / host.instance_id / "disk" / POWEROFF_MARK
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()

    def _prepare(self, host: Host, inst: dict[str, Any]) -> None:
        """The machine as packer/cloud leaves a VM: network, disk, image, unit, IMDS."""
        netns.node_up(host.netns, host.veth, host.ip, self.bridge, PREFIX)
        # As in a VPC: a default route to the VPC router (this machine's bridge
        # address, which forwards nothing: checked at start).  Ray finds a node's own
        # address by the route out; without one it would pick 127.0.0.1.
        run(["ip", "-n", host.netns, "route", "replace", "default", "via", GATEWAY])
        run(["ip", "-n", host.netns, "addr", "add", f"{imds.ADDRESS}/32", "dev", "lo"], check=False)
        pw = pwd.getpwnam(self.user)
        root = self.base / "instances" / host.instance_id
        disk = root / "disk"
        for d, mode in ((root, 0o755), (disk, 0o755), (root / "var-tmp", 0o1777)):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, mode)
        os.chown(disk, pw.pw_uid, pw.pw_gid)
        name = "ip-" + host.ip.replace(".", "-")
        self._resolve(host.ip, name)
        inner = " && ".join(
            [
                f"hostname {name}",
                f"mount --bind {shlex.quote(str(self.base / 'hosts'))} /etc/hosts",
                f"mount --bind {shlex.quote(str(disk))} {sshhosts.HOST_DISK}",
                f"mount --bind {shlex.quote(str(self.base / 'image'))} {IMAGE_DIR}",
                f"mount --bind {shlex.quote(str(self.sif))} {IMAGE_DIR / 'syndeo.sif'}",
                f"mount --bind {shlex.quote(str(root / 'var-tmp'))} /var/tmp",
                f"mount --bind {shlex.quote(str(self.base / 'sbin'))} {POWEROFF_DIR}",
                "exec sleep infinity",
            ]
        )
        sshhosts.HOST_DISK.mkdir(mode=0o755, parents=True, exist_ok=True)
        holder = subprocess.Popen(
            [
                "nsenter",
                f"--net={netns.NETNS_DIR / host.netns}",
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                inner,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

        def holding() -> bool | None:
            if holder.poll() is not None:
                err = holder.stderr.read().decode() if holder.stderr else ""
                raise TargetError(f"machine setup failed: {err.strip()}")
            cmd = Path(f"/proc/{holder.pid}/cmdline").read_bytes()
            return True if cmd.startswith(b"sleep") else None

        wait_until(holding, 30, f"{host.instance_id}'s namespaces")
        host.machine = InstanceMachine(host.instance_id, self.user, disk, holder.pid)
        (root / "machine.json").write_text(
            json.dumps(dataclasses.asdict(host.machine), default=str)
        )
        host.vm = cloudinit.VmHost(
            host.machine, {self.unit.name: self.unit}, poweroff=f"{POWEROFF_DIR}/poweroff"
        )
        host.vm.bake(self.unit.exec_start, START_SCRIPT, 0o755)
        if self.unit.exec_stop_post is not None:
            host.vm.bake(self.unit.exec_stop_post, STOPPED_SCRIPT, 0o755)
        host.meta = self._metadata(host, inst)
        sock = imds.listen_in(netns.NETNS_DIR / host.netns)
        host.server = imds.serve(sock, host.meta, self._credentials, self._profile)

    def _resolve(self, ip: str, name: str) -> None:
        """``name`` (and its name under DNS_SUFFIX) resolves to ``ip`` on every machine."""
        line = f"{ip} {name}.{DNS_SUFFIX} {name}\n"
        with self.lock:
            hosts = self.base / "hosts"
            if line not in hosts.read_text().splitlines(keepends=True):
                with hosts.open("a") as out:
                    out.write(line)

    def _metadata(self, host: Host, inst: dict[str, Any]) -> imds.Instance:
        opts = inst.get("MetadataOptions", {})
        meta = imds.Instance(
            instance_id=host.instance_id,
            private_ip=host.ip,
            zone=inst.get("Placement", {}).get("AvailabilityZone", f"{REGION}a"),
            region=REGION,
            http_tokens=opts.get("HttpTokens", "optional"),
            hop_limit=int(opts.get("HttpPutResponseHopLimit", 1)),
            profile_arn=None,
            profile_id=None,
            role_name=None,
        )
        self._profile(meta)
        return meta

    def _profile(self, meta: imds.Instance) -> None:
        """The instance's profile and its role as EC2 and IAM say now."""
        found = self.client("ec2").describe_instances(InstanceIds=[meta.instance_id])
        insts = [i for r in found["Reservations"] for i in r["Instances"]]
        profile = (insts[0].get("IamInstanceProfile") or {}) if insts else {}
        role = None
        if profile.get("Arn"):
            name = profile["Arn"].rsplit("/", 1)[-1]
            roles = self.client("iam").get_instance_profile(InstanceProfileName=name)
            role = next(iter(roles["InstanceProfile"]["Roles"]), None)
        meta.profile_arn, meta.profile_id = profile.get("Arn"), profile.get("Id")
        meta.role_name = role["RoleName"] if role else None

    def _credentials(self, inst: imds.Instance) -> dict[str, str]:
        """The role's session credentials for this instance, from moto's STS directly
        (as EC2 itself asks STS: the role's trust policy names the EC2 service, which
        no caller of the API can be)."""
        from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
        from moto.sts.models import sts_backends

        arn = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/{inst.role_name}"
        role = sts_backends[DEFAULT_ACCOUNT_ID]["aws"].assume_role(
            region_name=REGION,
            role_session_name=inst.instance_id,
            role_arn=arn,
            policy=None,  # type: ignore[arg-type]
            duration=3600,
            external_id=None,  # type: ignore[arg-type]
        )
        return {
            "AccessKeyId": role.access_key_id,
            "SecretAccessKey": role.secret_access_key,
            "Token": role.session_token,
            "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600)),
        }

    def power_off(self, iid: str) -> None:
        """Pull the plug: SIGKILL everything on the machine, then remove it."""
        host = self.hosts.pop(iid, None)
        if host is None:
            return
        for pid in netns.netns_pids(host.netns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if host.server is not None:
            host.server.shutdown()
            host.server.socket.close()
        with contextlib.suppress(TargetError):
            wait_until(
                lambda: None if netns.netns_pids(host.netns) else True,
                10,
                f"{iid}'s processes to go",
            )
        with contextlib.suppress(TargetError):
            netns.node_down(host.netns, host.veth)
        # Its console, kept for whoever debugs the cluster (the disk itself is gone).
        logs = self.base / "logs"
        logs.mkdir(exist_ok=True)
        if host.vm is not None:
            for unit in host.vm.units:
                (logs / f"{iid}-{unit}.log").write_text(host.vm.log(unit))
        shutil.rmtree(self.base / "instances" / iid, ignore_errors=True)
        _log(f"{iid}: powered off")

    def stop(self) -> None:
        self.stopping.set()
        for iid in list(self.hosts):
            self.power_off(iid)
        with contextlib.suppress(Exception):
            self.server.stop()
        netns.bridge_down(self.bridge)


def _log_calls(path: Path) -> None:
    """One JSON line per EC2, IAM or STS request moto answers (its time, service,
    action, access key and client: "terraform", "Boto3", ...), for what a benchmark
    counts; the emulator's own requests and S3 (served another way by moto) are not
    in it."""
    from moto.core.responses import BaseResponse

    call_action = BaseResponse.call_action
    lock = threading.Lock()
    path.unlink(missing_ok=True)  # this start's requests only

    def logged(self: Any) -> Any:
        agent = str(self.headers.get("User-Agent", ""))
        if OWN_AGENT in agent:  # the hypervisor's own polling is not a client's
            return call_action(self)
        try:
            key = self.get_access_key()
        except Exception:  # an unsigned request: moto refuses it itself
            key = ""
        line = json.dumps(
            {
                "at": time.time(),
                "service": self.service_name,
                "action": self._get_action(),
                "key": key,
                "client": "terraform" if "Terraform" in agent else agent.split("/", 1)[0],
            }
        )
        with lock, path.open("a") as f:
            f.write(line + "\n")
        return call_action(self)

    BaseResponse.call_action = logged  # type: ignore[method-assign]


def api_calls(base: Path | None = None) -> list[dict[str, Any]]:
    """Every request :func:`_log_calls` wrote so far under ``base``."""
    path = (base or default_base()).resolve() / CALLS
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.endswith("}")]


def _moto_as_aws(base: Path) -> None:
    """Where moto answers otherwise than AWS in a way Terraform acts on.

    - Bucket policies are evaluated without their conditioned statements (see the
      module doc).
    - A network interface without a public IP is described with an empty
      ``Association``; EC2 leaves it out.  The AWS provider reads any association as
      ``associate_public_ip_address = true`` and plans to *replace* every instance on
      the next apply (grow, shrink) -- on EC2 it plans nothing.
    - moto always has capacity.  A zone listed in ``<base>/no-capacity`` (one per line,
      written by a test) answers RunInstances there as EC2 does when it has none.
    """
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface
    from moto.ec2.models.instances import InstanceBackend
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.s3.models import FakeBucket

    described = NetworkInterface.association
    assert isinstance(described, property) and described.fget is not None
    association = described.fget
    NetworkInterface.association = property(lambda self: association(self) or None)  # type: ignore[assignment,method-assign]

    def get_permission(self: Any, action: str, resource: str) -> Any:
        if self.policy is None:
            return PermissionResult.NEUTRAL
        doc = json.loads(self.policy)
        statements = doc.get("Statement", [])
        statements = [statements] if isinstance(statements, dict) else statements
        doc["Statement"] = [s for s in statements if "Condition" not in s]
        return IAMPolicy(json.dumps(doc)).is_action_permitted(action, resource)

    FakeBucket.get_permission = get_permission  # type: ignore[method-assign]

    run_instances = InstanceBackend.run_instances

    def run_without_capacity(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The AWS provider names the subnet in a network interface when it sets
        # associate_public_ip_address (terraform/aws does), else at the top level.
        nics = kwargs.get("nics") or [{}]
        subnet = kwargs.get("subnet_id") or nics[0].get("SubnetId")
        zone = self.get_subnet(subnet).availability_zone if subnet else kwargs.get("placement")
        with contextlib.suppress(OSError):
            if zone in (base / "no-capacity").read_text().split():
                itype = kwargs.get("instance_type", "")
                # EC2's own words for it (its error reference, InsufficientInstanceCapacity).
                raise EC2ClientError(
                    "InsufficientInstanceCapacity",
                    f"We currently do not have sufficient {itype} capacity in the "
                    f"Availability Zone you requested ({zone}). Our system will be working "
                    "on provisioning additional capacity.",
                )
        return run_instances(self, *args, **kwargs)

    InstanceBackend.run_instances = run_without_capacity  # type: ignore[method-assign]


def _sif_digest(sif: Path) -> str | None:
    """The sha256 its manifest records (``invoke build`` writes it beside the SIF)."""
    try:
        manifest = json.loads(sif.with_name(sif.name + ".manifest.json").read_text())
    except (OSError, ValueError):
        return None
    value = manifest.get("sha256") if isinstance(manifest, dict) else None
    return value if isinstance(value, str) else None


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def serve(base: Path, sif: Path) -> None:
    """The daemon's main: until SIGTERM."""
    # IAM authorization from the 4th request on (the first 3 make the admin user).
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    cloud = Cloud(base, sif)

    def _term(signum: int, _frame: Any) -> None:
        cloud.stopping.set()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    try:
        state = cloud.start()
        _log(f"emulated AWS up: {state.endpoint}, image {state.image_id}")
        cloud.run()
    finally:
        cloud.stop()
        _log("emulated AWS down")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testbeds.awsemu")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("base", type=Path)
    s.add_argument("sif", type=Path)
    args = parser.parse_args(argv)
    serve(args.base, args.sif)


if __name__ == "__main__":
    main()
