"""User-facing configuration: a TOML file, overridden by command-line options.

``DeployConfig`` is what a user controls; :class:`syndeo.spec.ClusterSpec` is what
a target needs, derived from it.  Validation errors become one line naming the
offending setting (``nodes: must be >= 1``), never a pydantic dump.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from syndeo.bench.models import BenchConfig
from syndeo.compare.settings import CostSettings
from syndeo.core.clouds import CLOUDS, TARGETS, TargetName
from syndeo.core.errors import ConfigError
from syndeo.core.groups import GroupConfig, Layout, build_layout
from syndeo.core.nodeconfig import CLUSTER_ID_RE, ClusterOptions
from syndeo.core.option import option

RENDEZVOUS_RE = re.compile(r"^(file|s3|gs|az|oss)://[^\r\n]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class BenchSettings(_Strict):
    """The built-in workload: the paper's rollout benchmark (see ``syndeo.bench``)."""

    envs: list[str] = option(
        ["CartPole-v1"],
        "benchmark environment id(s) (syndeo: repeat; invoke: comma-separated)",
        name="env",
    )
    mode: Literal["count", "collect"] = option("count", "benchmark mode: count | collect")
    protocol: Literal["paper", "steady"] = "paper"
    # The benchmark's own defaults (the paper's protocol), declared once in BenchConfig.
    samples_per_cpu: int = option(
        BenchConfig.model_fields["samples_per_cpu"].default, "benchmark samples per CPU", ge=1
    )
    repeats: int = option(BenchConfig.model_fields["repeats"].default, "benchmark repeats", ge=1)

    def argv(self) -> list[str]:
        # One builder of the benchmark's command line, shared with `invoke bench`.
        from syndeo.bench.argv import bench_argv

        return bench_argv(
            env=",".join(self.envs),
            mode=self.mode,
            protocol=self.protocol,
            samples_per_cpu=self.samples_per_cpu,
            repeats=self.repeats,
        )


class RecoverySettings(_Strict):
    """``[recovery]``: what the launcher does when a node (a worker, or the head) is lost
    mid-run."""

    replace_lost: bool = False  # start a replacement for that rank, which joins the head
    max_replacements: int = Field(default=3, ge=0, le=1000)  # per run, over all ranks
    # A head lost without a done record: start the whole cluster again as the next
    # attempt, up to this many times per run (0: the run ends, as before).
    max_restarts: int = Field(default=0, ge=0, le=100)


class DeployConfig(_Strict, ClusterOptions):
    """Every setting a user controls, declared once: type, bounds, default and, for those
    that are command-line options too, help (:func:`option`).  The node settings a
    cluster's nodes share come from :class:`ClusterOptions` (declared there, once)."""

    target: TargetName = option(
        "local",
        f"{' | '.join(TARGETS)} (default: local, or the config's)",
    )
    nodes: int = option(2, "number of nodes (default 2)", ge=1, le=4096)
    cpus_per_node: int = option(1, "CPUs each node offers to Ray (default 1)", ge=1, le=1024)
    gpus_per_node: int = option(0, "GPUs each node offers to Ray (default 0)", ge=0, le=64)
    memory_mb_per_node: int | None = option(
        None,
        "memory each node offers to Ray, MiB, object store included (default: the "
        "allocation's -- Slurm's --mem, a cgroup limit -- else Ray's)",
        ge=256,
    )
    object_store_mb_per_node: int | None = option(
        None, "object store per node, MiB (default: Ray's)", ge=80
    )
    # A cluster without [[groups]] that follows demand: its workers become a group of
    # their own ("worker") between min_nodes - 1 and max_nodes - 1 (see _follow_demand).
    min_nodes: int | None = option(
        None, "the fewest nodes, head included, of a cluster with --max-nodes (default 1)", ge=1
    )
    max_nodes: int | None = option(
        None,
        "up: follow demand with Ray's autoscaler, up to this many nodes (head included)",
        ge=2,
        le=4096,
    )
    cluster_id: str | None = option(None, "the new cluster's id (default: generated)")
    rendezvous: str | None = option(
        None, "file:///dir, s3://bucket/prefix, gs://…, az://… (default per target)"
    )
    join_timeout_s: float = option(
        300.0, "deadline for all nodes to join, seconds", name="join_timeout", gt=0, le=86400
    )
    # Ray's own TLS between every Ray process and client: a CA per launch, made by the
    # launcher, handed to the nodes sealed with the launch key (syndeo/core/tls.py).
    # None: the target's default (ClusterSpec.from_config): on where the nodes talk over a
    # network others share (slurm, ssh), off on loopback and on the clouds' own networks.
    tls: bool | None = option(
        None,
        "Ray's TLS between all nodes and clients, a CA per launch (default: on for slurm "
        "and ssh, off for local and the clouds; up prints the client's variables)",
        flag="negatable",
    )
    # What Slurm and ssh nodes get to reach an s3://, az:// or gs:// rendezvous: credentials
    # made for the cluster (its prefix or container, at most 36 h; for gs:// 1-hour tokens
    # the launcher renews: syndeo/launcher/nodecreds/), or "forward": the launcher's own,
    # for an `up` cluster that must outlive 36 h.
    node_credentials: Literal["scoped", "forward"] = "scoped"
    run: str | None = option(
        None,  # the built-in benchmark
        'your own workload, e.g. "python train.py --epochs 3" (default: the benchmark); no '
        "secrets in it (it is recorded in scripts, state and deploy.json)",
    )
    workdir: Path | None = option(None, "working directory of the workload (default: here)")
    # What of the work dir stays behind where it is packed (VM and ssh targets), besides
    # .gitignore and .syndeoignore in it; as for `submit --exclude`.
    exclude: list[str] = option(
        [],
        ".gitignore-style pattern not packed with the work dir (syndeo: repeat; invoke: "
        "comma-separated)",
    )
    container: Path | None = option(None, "run every node in this Apptainer image (.sif)")
    # Python packages the workload needs beyond the image's, installed on every node
    # from wheels the launcher resolves (syndeo/launcher/wheelhouse.py).
    requirements: Path | None = option(
        None,
        "packages your program needs beyond the image's, installed on every node without a "
        "package index (default: requirements.txt in the work dir, if any)",
    )
    results_dir: Path = option(Path("results"), "where results are written (default ./results)")
    bench: BenchSettings = BenchSettings()
    cost: CostSettings = CostSettings()  # [cost.onprem], read by `invoke compare`
    recovery: RecoverySettings = RecoverySettings()
    # Target-specific sections are validated by the target that reads them.
    slurm: dict[str, Any] = {}
    ssh: dict[str, Any] = {}
    aws: dict[str, Any] = {}
    gcp: dict[str, Any] = {}
    azure: dict[str, Any] = {}
    alibaba: dict[str, Any] = {}
    # Node groups (see syndeo/core/groups.py for the head rule); none = one group of `nodes`.
    head: Literal["own", "first"] = "own"  # own: a 1-node group `head`; first: rank 0 of groups[0]
    groups: list[GroupConfig] = []
    _layout: Layout | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _follow_demand(cls, data: Any) -> Any:
        """Top-level ``max_nodes`` (``up --max-nodes``): the workers become one group that
        follows demand, beside the head's own group."""
        if not isinstance(data, dict) or data.get("max_nodes") is None:
            if isinstance(data, dict) and data.get("min_nodes") is not None:
                raise ValueError("min_nodes on its own means nothing: add max_nodes")
            return data
        if data.get("groups"):
            raise ValueError(
                "min_nodes/max_nodes on the top level are for a cluster without [[groups]]; "
                "with groups, set them in each group that follows demand"
            )
        if data.get("head", "own") != "own":
            raise ValueError('max_nodes on the top level needs head = "own" (the default)')
        least, most = data.get("min_nodes") or 1, data["max_nodes"]
        if not isinstance(least, int) or not isinstance(most, int):
            return data  # the fields' own rules say what is wrong
        if least > most:
            raise ValueError(f"min_nodes {least} is more than max_nodes {most}")
        if "nodes" in data:
            raise ValueError("with max_nodes the cluster starts at min_nodes: leave nodes out")
        worker = {"name": "worker", "min_nodes": least - 1, "max_nodes": most - 1}
        return {**data, "groups": [worker]}

    @field_validator("groups")
    @classmethod
    def _group_list(cls, v: list[GroupConfig], info: ValidationInfo) -> list[GroupConfig]:
        # Cross-group rules (duplicates, head first, min_nodes) here, so the error
        # names `groups`; the shape is resolved once the top level is known.
        if v:
            build_layout(
                v, head=info.data.get("head", "own"), cpus=1, gpus=0, memory_mb=None, container=None
            )
        return v

    @model_validator(mode="after")
    def _groups(self) -> DeployConfig:
        if not self.groups:
            self._layout = None
            return self
        layout = build_layout(
            self.groups,
            head=self.head,
            cpus=self.cpus_per_node,
            gpus=self.gpus_per_node,
            memory_mb=self.memory_mb_per_node,
            container=self.container,
        )
        if "nodes" in self.model_fields_set and self.nodes != layout.nodes:
            raise ValueError(
                f"nodes = {self.nodes} but the groups add up to {layout.nodes} nodes "
                "(with groups, leave nodes out)"
            )
        if layout.nodes > 4096:
            raise ValueError(f"the groups add up to {layout.nodes} nodes; at most 4096")
        # Bypass assignment validation (it would run this validator again).
        self.__dict__["nodes"] = layout.nodes
        self._layout = layout
        return self

    @property
    def layout(self) -> Layout | None:
        """The resolved node groups, or None for a config without ``[[groups]]``."""
        return self._layout

    @field_validator("cluster_id")
    @classmethod
    def _cluster_id(cls, v: str | None) -> str | None:
        if v is not None and not CLUSTER_ID_RE.match(v):
            raise ValueError("use 1-40 of a-z, 0-9 and '-', starting with a letter or digit")
        return v

    @field_validator("rendezvous")
    @classmethod
    def _rendezvous(cls, v: str | None) -> str | None:
        # The same rule as terraform/modules/node (tests/iac/test_node_module.py).
        if v is not None and not RENDEZVOUS_RE.match(v):
            raise ValueError(
                "use file:///dir, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix "
                "or oss://bucket/prefix"
            )
        return v

    @field_validator("run")
    @classmethod
    def _run(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                if not shlex.split(v):
                    raise ValueError("is empty")
            except ValueError as exc:
                raise ValueError(f"is not a valid command line ({exc})") from None
        return v

    def workload_command(self) -> str:
        return self.run if self.run is not None else shlex.join(self.bench.argv())


def one_line(exc: ValidationError, source: str, prefix: str = "") -> str:
    """A validation error as one line naming each offending setting (``nodes: …``)."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "") or "config"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "is not a known setting"
        elif err["type"] == "missing":
            msg = "is required"
        parts.append(f"{where}: {msg}")
    return f"invalid {source}: " + "; ".join(parts)


def load_config(path: Path | None = None, **overrides: Any) -> DeployConfig:
    """The file's settings (if any) with every non-None override applied on top."""
    data: dict[str, Any] = {}
    source = "settings"
    if path is not None:
        source = f"config {path}"
        data = _read_toml(path)
    for key, value in overrides.items():
        if value is not None:
            _apply_override(data, key, value, overrides)
    _nodes_from_ssh_hosts(data)
    try:
        return DeployConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(one_line(exc, source)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    """The config file's settings; a missing, unreadable or malformed file in one line."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _apply_override(data: dict[str, Any], key: str, value: Any, overrides: dict[str, Any]) -> None:
    """Set one override, a prefixed one (``bench_``, ``ssh_``, ``vm_``) in its section."""
    if key.startswith("bench_"):
        data.setdefault("bench", {})[key.removeprefix("bench_")] = value
    elif key.startswith("ssh_"):
        data.setdefault("ssh", {})[key.removeprefix("ssh_")] = value
    elif key.startswith("vm_"):
        # Machine options (--instance-type, --region, …) belong to the chosen
        # cloud's section; which one is known only once the target is.
        target = str(overrides.get("target") or data.get("target") or "local")
        name = key.removeprefix("vm_")
        if target not in CLOUDS:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} applies to --target {'|'.join(CLOUDS)}, not {target}")
        data.setdefault(target, {})[name] = value
    else:
        data[key] = value


def _nodes_from_ssh_hosts(data: dict[str, Any]) -> None:
    """An ssh run without ``nodes`` (or groups) gets one node per host."""
    ssh_hosts = data.get("ssh", {}).get("hosts") if isinstance(data.get("ssh"), dict) else None
    if (
        data.get("target") == "ssh"
        and "nodes" not in data
        and ssh_hosts
        and not data.get("groups")
        and data.get("max_nodes") is None  # refused for ssh with its own reason
    ):
        data["nodes"] = len(ssh_hosts.split(",") if isinstance(ssh_hosts, str) else ssh_hosts)
