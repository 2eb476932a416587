"""The ssh target: nodes on machines the user already has, started by Terraform.

``terraform/ssh`` connects to every host, uploads the image when the host's copy
has another digest, writes the node environment and starts ``syndeo node``;
``terraform destroy`` stops exactly those nodes.  This module only turns the
``[ssh]`` settings into that module's variables -- host keys included, so that
no connection trusts a host it has not seen before.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import ipaddress
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from syndeo.core.errors import ConfigError, TargetError
from syndeo.core.groups import Group
from syndeo.launcher.config import DeployConfig, one_line
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.state import cluster_dir, home
from syndeo.launcher.targets.terraform import TerraformTarget

LIVENESS_EVERY_S = 5.0


class SshSettings(BaseModel):
    """The ``[ssh]`` config section (``--hosts``, ``--ssh-user``, ``--ssh-key`` set it too)."""

    model_config = ConfigDict(extra="forbid")

    # In rank order; with [[groups]], the hosts of groups that name none in [groups.ssh].
    hosts: list[str] = []
    user: str = Field(default_factory=getpass.getuser)
    key: Path | None = None  # None: the ssh agent
    known_hosts: Path = Path("~/.ssh/known_hosts")
    port: int = Field(default=22, ge=1, le=65535)
    connect_timeout_s: int = Field(default=60, ge=1, le=3600)
    node_ips: list[str] | None = None  # None: the hosts themselves when they are IPs
    python: str = "python3"  # bare nodes: an interpreter with syndeo on the hosts
    remote_image_dir: str = ".syndeo/images"
    host_dir: str = "$HOME/.syndeo"
    scratch_dir: str | None = None

    @field_validator("hosts", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _host_list(v)

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        if v == "root":
            raise ValueError("nodes run unprivileged: name an ordinary user (--ssh-user)")
        return v

    @classmethod
    def parse(cls, section: dict[str, Any]) -> SshSettings:
        try:
            return cls.model_validate(section)
        except ValidationError as exc:
            raise ConfigError(one_line(exc, "settings", prefix="ssh")) from None


def _host_list(v: Any) -> Any:
    """``"h1, h2"`` or a list; anything else is left for validation to refuse."""
    return [h.strip() for h in v.split(",") if h.strip()] if isinstance(v, str) else v


def _pool(group: Group) -> list[str]:
    """The hosts a group that follows demand may add nodes on (``[groups.ssh] pool``)."""
    pool = _host_list(group.ssh.get("pool", []))
    if not isinstance(pool, list) or not all(isinstance(h, str) for h in pool):
        raise ConfigError(f"group {group.name!r}: [groups.ssh] pool is a list of hosts")
    if pool and group.autoscale is None:
        raise ConfigError(
            f"group {group.name!r}: [groups.ssh] pool is for a group that follows demand "
            "(max_nodes); name a fixed group's hosts in hosts"
        )
    if group.autoscale is not None and pool and len(pool) < group.autoscale[1]:
        raise ConfigError(
            f"group {group.name!r}: max_nodes is {group.autoscale[1]} but its pool has "
            f"{len(pool)} host(s) (one node per host)"
        )
    return [str(h) for h in pool]


def _best_key(entries: list[str]) -> str:
    """``<type> <base64>`` of a host's known_hosts lines, ed25519 preferred."""
    best = sorted(entries, key=lambda e: "ssh-ed25519" not in e)[0]
    return " ".join(best.split()[1:3])


def _host_keys(host: str, port: int, known_hosts: Path) -> list[str]:
    name = host if port == 22 else f"[{host}]:{port}"
    out = subprocess.run(
        ["ssh-keygen", "-F", name, "-f", str(known_hosts)],
        capture_output=True,
        text=True,
        check=False,
    )
    return [ln for ln in out.stdout.splitlines() if ln and not ln.startswith("#")]


class SshTarget(TerraformTarget):
    name = "ssh"
    module = "ssh"
    # Hosts have no instance identity: the rendezvous credentials travel with the
    # node environment (written 0600 on each host).
    forward_credentials = True
    grows = True  # terraform/ssh takes var.grown
    node_resource = "terraform_data.node"  # its start runs again on the same host

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        self._last_check = 0.0
        self._host_lines: list[str] = []

    @functools.cached_property
    def settings(self) -> SshSettings:
        # Parsed on first use: `invoke down` stops a cluster from its saved state alone.
        return SshSettings.parse(self.cfg.ssh)

    def default_rendezvous(self) -> str:
        raise ConfigError(
            "the ssh target needs --rendezvous: a file:///dir that every host and this "
            "machine see (a shared filesystem), or s3://, gs://, az://"
        )

    def _rank_hosts(self, spec: ClusterSpec) -> list[str]:
        """One host per rank: group by group, each group's own ``[groups.ssh] hosts`` or
        else the next of ``[ssh] hosts``; one line for every mismatch."""
        s = self.settings
        if spec.layout is None:
            if not s.hosts:
                raise ConfigError("ssh: no hosts given (--hosts h1,h2 or [ssh] hosts)")
            if spec.nodes != len(s.hosts):
                raise ConfigError(
                    f"ssh: {spec.nodes} nodes asked for but {len(s.hosts)} hosts given "
                    "(one node per host: set --nodes to the number of hosts)"
                )
            return list(s.hosts)
        pool, out = list(s.hosts), []
        for g in spec.layout.groups:
            unknown = sorted(set(g.ssh) - {"hosts", "pool"})
            if unknown:
                raise ConfigError(
                    f"group {g.name!r}: [groups.ssh] takes only hosts and pool, not {unknown[0]!r}"
                )
            own = g.ssh.get("hosts")
            if own is not None:
                hosts = _host_list(own)
                if not isinstance(hosts, list) or len(hosts) != g.nodes:
                    raise ConfigError(
                        f"ssh: group {g.name!r} has {g.nodes} node(s) but [groups.ssh] hosts "
                        f"names {len(hosts) if isinstance(hosts, list) else 'no list of'} "
                        "host(s) (one node per host)"
                    )
            else:
                hosts, pool = pool[: g.nodes], pool[g.nodes :]
                if len(hosts) < g.nodes:
                    raise ConfigError(
                        f"ssh: not enough hosts for group {g.name!r} ({g.nodes} node(s)): "
                        "add them to [ssh] hosts (groups without their own hosts take "
                        "these in order) or to the group's [groups.ssh] hosts"
                    )
            out += [str(h) for h in hosts]
        if pool:
            raise ConfigError(
                f"ssh: host(s) {', '.join(pool)} in [ssh] hosts belong to no group "
                "(each group takes as many as it has nodes)"
            )
        pools = [h for g in spec.layout.groups for h in _pool(g)]
        twice = sorted({h for h in out + pools if (out + pools).count(h) > 1})
        if twice:
            raise ConfigError(f"ssh: host {twice[0]} is listed twice (one node per host)")
        return out

    def machine_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        s = self.settings
        rank_hosts = self._rank_hosts(spec)
        known = s.known_hosts.expanduser()
        if not known.is_file():
            raise ConfigError(f"ssh: known_hosts file {known} not found (ssh.known_hosts)")
        if s.key is not None and not s.key.expanduser().is_file():
            raise ConfigError(f"ssh: key file {s.key} not found (--ssh-key)")
        lines: list[str] = []
        host_keys: list[str] = []
        for host in rank_hosts:
            entries = _host_keys(host, s.port, known)
            if not entries:
                raise ConfigError(
                    f"ssh: host {host} is not in {known}: connect to it once with ssh (and "
                    "check its key), so that no connection trusts an unknown host"
                )
            lines += entries
            host_keys.append(_best_key(entries))
        pools = [h for g in (spec.layout.groups if spec.layout else []) for h in _pool(g)]
        for host in pools:  # known now: the watcher adds nodes there later, unattended
            if not _host_keys(host, s.port, known):
                raise ConfigError(
                    f"ssh: pool host {host} is not in {known}: connect to it once with ssh "
                    "(and check its key), so that no connection trusts an unknown host"
                )
        self._host_lines = lines
        image = spec.image.resolve() if spec.image is not None else None
        return {
            "hosts": rank_hosts,
            "host_keys": host_keys,
            "known_hosts_file": str(self._known_hosts(spec.cluster_id)),
            "ssh_user": s.user,
            "ssh_port": s.port,
            "ssh_private_key_file": str(s.key.expanduser().resolve()) if s.key else None,
            "connect_timeout": f"{s.connect_timeout_s}s",
            "image": str(image) if image else None,
            "remote_image_dir": s.remote_image_dir,
        }

    def node_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        s = self.settings
        node_ips = s.node_ips
        if node_ips is None:
            rank_hosts = self._rank_hosts(spec)
            node_ips = rank_hosts if all(_is_ipv4(h) for h in rank_hosts) else []
        return {
            "node_ips": node_ips,
            "image_digest": spec.image_digest,
            "host_dir": s.host_dir,
            "python": s.python,
            "scratch_dir": s.scratch_dir,
            # A packed work dir (deploy --run) is the head's own copy; else a --workdir
            # the hosts share.
            "workdir": str(spec.workdir)
            if spec.workdir and self.cfg.workdir and not spec.workdir_digest
            else None,
        }

    @staticmethod
    def _known_hosts(cluster_id: str) -> Path:
        # Named here, written by prepare(): a dry run writes nothing.
        return home() / "clusters" / cluster_id / "known_hosts"

    def prepare(self, spec: ClusterSpec) -> None:
        self._known_hosts(spec.cluster_id).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._known_hosts(spec.cluster_id).write_text("\n".join(self._host_lines) + "\n")

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        # Also what poll needs later, when `invoke down` has only the saved state.
        s = self.settings
        return {
            "provider": "ssh",
            "hosts": self._rank_hosts(spec),
            "count": spec.nodes,
            "user": s.user,
            "port": s.port,
            "key": str(s.key.expanduser()) if s.key else None,
            # grow reads new hosts' keys from the same file.
            "known_hosts": str(s.known_hosts.expanduser().resolve()),
        }

    # ------------------------------------------------------------------ growing
    def grown_nodes(
        self,
        launched: Launched,
        tfvars: dict[str, Any],
        group: Group,
        ranks: list[int],
        hosts: list[str],
    ) -> list[dict[str, Any]]:
        in_use = set(tfvars["hosts"]) | {e["host"] for e in tfvars["node"].get("grown", [])}
        if not hosts and _pool(group):  # a group that follows demand: its pool's free hosts
            hosts = [h for h in _pool(group) if h not in in_use][: len(ranks)]
            if len(hosts) < len(ranks):
                raise TargetError(
                    f"ssh: group {group.name!r} has no free host left in its pool "
                    f"({', '.join(_pool(group))})"
                )
        if len(hosts) != len(ranks):
            raise ConfigError(
                f"ssh: --hosts names {len(hosts)} machine(s) for {len(ranks)} new node(s) "
                "(one node per host)"
            )
        m = launched.tf.machines
        known = Path(m.get("known_hosts") or self.settings.known_hosts.expanduser())
        node = tfvars["node"]
        added: list[dict[str, Any]] = []
        lines: list[str] = []
        for rank, host in zip(ranks, hosts, strict=True):
            if host in in_use or host in {e["host"] for e in added}:
                raise ConfigError(f"ssh: host {host} already runs a node of this cluster")
            entries = _host_keys(host, int(m["port"]), known)
            if not entries:
                raise ConfigError(
                    f"ssh: host {host} is not in {known}: connect to it once with ssh (and "
                    "check its key), so that no connection trusts an unknown host"
                )
            if node.get("node_ips") and not _is_ipv4(host):
                raise ConfigError(
                    f"ssh: the cluster's nodes bind Ray to their addresses: name {host} by "
                    "its IPv4 address"
                )
            lines += entries
            added.append(
                {
                    "rank": rank,
                    "group": group.name,
                    "host": host,
                    "host_key": _best_key(entries),
                    "node_ip": host if node.get("node_ips") else None,
                }
            )
        # The upload of the image uses the ssh client: it must know the new hosts too.
        with Path(tfvars["known_hosts_file"]).open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        return added

    # ------------------------------------------------------------------ liveness
    def _ssh(self, host: str, command: str, launched: Launched) -> subprocess.CompletedProcess[str]:
        m = launched.tf.machines
        argv = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={cluster_dir(launched.cluster_id) / 'known_hosts'}",
            "-o",
            "ConnectTimeout=10",
            "-p",
            str(m["port"]),
        ]
        if m.get("key"):
            argv += ["-i", m["key"], "-o", "IdentitiesOnly=yes"]
        return subprocess.run(
            [*argv, f"{m['user']}@{host}", command],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def poll(self, launched: Launched) -> int | None:
        rc = super().poll(launched)
        if rc is not None or time.monotonic() - self._last_check < LIVENESS_EVERY_S:
            return rc
        self._last_check = time.monotonic()
        # A head that died before it could reach the rendezvous (an unreachable
        # store, a missing image) says why only in its own log: fetch it over ssh.
        head_dir = launched.tf.outputs.get("host_dirs", [None])[0]
        if not head_dir:
            return None
        check = (
            f'd="{head_dir}"; test -s "$d/node.pid" && kill -0 "-$(cat "$d/node.pid")" '
            f'2>/dev/null && exit 0; tail -n 5 "$d/node.log" 2>/dev/null; exit 3'
        )
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            head_host = launched.tf.machines["hosts"][0]
            out = self._ssh(head_host, check, launched)
            if out.returncode == 3:
                # The head may have finished cleanly between two reads: ask once more.
                rc = super().poll(launched)
                if rc is None:
                    tail = " | ".join(ln.strip() for ln in out.stdout.splitlines() if ln.strip())
                    launched.tf.head_failure = f"exited on {head_host}: {tail}"
                    return 1
        return rc


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True
