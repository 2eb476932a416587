"""What the aws, gcp and azure targets share: settings, the rendezvous bucket, checks.

Each cloud is a module under ``terraform/<cloud>`` with the same variable names
(tests/iac/test_interface.py) and a few lines in ``syndeo/launcher/targets/<cloud>.py``:
its URI scheme, its credential check and its cloud-only variables.  The bucket
is created with the cluster (a random name, so nothing can be claimed before it
exists) unless ``--rendezvous`` names an existing one.
"""

from __future__ import annotations

import functools
import secrets
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from syndeo.core.errors import ConfigError
from syndeo.core.groups import Layout
from syndeo.launcher.config import DeployConfig, one_line
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.terraform import TerraformTarget

PREFIX = "syndeo"  # the key prefix below which every cluster's records live
# What a group may set in its [groups.<cloud>] section.  Only the VM type: everything
# else (region, image, spot, disk, network) is one per cluster in terraform/<cloud>.
GROUP_SETTINGS = ("instance_type",)


# How often the watcher asks the provider for the cluster's VMs (one list request; the
# watcher asks at each status read): well inside every provider's request rate limits,
# and far quicker than a start clock.
OBSERVE_EVERY_S = 10.0


@dataclass(frozen=True)
class Machine:
    """One VM of the cluster as its provider lists it: its rank (the ``syndeo-rank``
    tag or label every module sets) and, once it has ended (stopped, terminated), why."""

    rank: int
    ended: str | None = None

    @classmethod
    def tagged(cls, tags: dict[str, Any], cluster_id: str, ended: str | None) -> Machine | None:
        """The VM whose tags (labels) are ``tags``, if it is a node of ``cluster_id``
        (its ``syndeo-cluster`` and ``syndeo-rank`` tags); None for anything else."""
        rank = str(tags.get("syndeo-rank", ""))
        if tags.get("syndeo-cluster") != cluster_id or not rank.isdigit():
            return None
        return cls(int(rank), ended)


class CloudSettings(BaseModel):
    """The ``[aws]`` / ``[gcp]`` / ``[azure]`` section (``--instance-type`` etc. set it too)."""

    model_config = ConfigDict(extra="forbid")

    instance_type: str | None = None
    region: str | None = None
    image: str | None = None  # the Packer-baked VM image (packer/cloud)
    zone: str | None = None
    spot: bool = False
    disk_size_gb: int = Field(default=30, ge=30, le=16384)  # the baked image is 30 GiB
    labels: dict[str, str] = {}
    admin_cidrs: list[str] = []
    project: str | None = None  # gcp only
    storage_account: str | None = None  # azure only
    admin_ssh_public_key: str | None = None  # azure only (None: a key nobody holds)
    permissions_boundary: str | None = None  # aws only: the node role's boundary (ARN)
    # aws only: the provider's max_retries (None: its 25, which rides out a zone's
    # InsufficientInstanceCapacity for minutes before the next zone is tried).
    api_max_retries: int | None = Field(default=None, ge=0, le=100)
    node_service_account: str | None = None  # gcp only: an existing SA for the nodes
    resource_group: str | None = None  # azure only: an existing group to deploy into
    disk_category: str | None = None  # alibaba only: the system disk category (None: ESSD)
    node_role: str | None = None  # alibaba only: an existing RAM role for the nodes


class CloudTarget(TerraformTarget):
    scheme: ClassVar[str]
    # terraform/aws|gcp|azure take node.grown: a grown node is a VM of its group's type,
    # keyed by its rank (grow/shrink create or destroy only those VMs).
    grows = True
    # Cloud-only settings this cloud accepts (others must stay unset).
    own: ClassVar[tuple[str, ...]] = ()
    # deploy/ calls terraform/<cloud> as module "cluster" (its main.tf).
    resource_prefix = "module.cluster."

    def __init__(self, cfg: DeployConfig, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(cfg, echo)
        # terraform/<cloud> is a module without a provider block (a caller may use it with
        # count/for_each); its deploy/ root configures the provider and passes every
        # variable on, so the tfvars are the module's own variables.
        self.module_dir = self.module_dir / "deploy"
        if cfg.container is not None:
            raise ConfigError(
                f"{self.name}: nodes run the SIF baked into the VM image (--image); "
                "--container is for local, slurm and ssh"
            )
        self._group_types(cfg.layout)  # bad [groups.<cloud>] input: one line, first

    def _group_types(self, layout: Layout | None) -> dict[str, str | None]:
        """Each group's own instance type from its ``[groups.<this cloud>]`` section (None:
        the top-level one).  Other clouds' sections are ignored: one config may carry
        the types for every cloud it is deployed to."""
        types: dict[str, str | None] = {}
        for g in layout.groups if layout is not None else []:
            section: dict[str, Any] = getattr(g, self.name)
            unknown = sorted(set(section) - set(GROUP_SETTINGS))
            if unknown:
                raise ConfigError(
                    f"group {g.name!r}: [groups.{self.name}] {unknown[0]} is not a per-group "
                    f"setting (only {', '.join(GROUP_SETTINGS)}; the rest is [{self.name}])"
                )
            value = section.get("instance_type")
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(
                    f"group {g.name!r}: [groups.{self.name}] instance_type must be a "
                    f"non-empty string, got {value!r}"
                )
            types[g.name] = value
        return types

    @functools.cached_property
    def settings(self) -> CloudSettings:
        section = getattr(self.cfg, self.name)
        if "record_expiry_days" in section:
            # Removed: expiring a running cluster's records broke the nodes that join later.
            raise ConfigError(
                f"{self.name}.record_expiry_days is no longer a setting: a bucket syndeo "
                "creates keeps the cluster's records while it runs, and `down` removes "
                "the bucket with them; delete the line"
            )
        try:
            s = CloudSettings.model_validate(section)
        except ValidationError as exc:
            raise ConfigError(one_line(exc, "settings", prefix=self.name)) from None
        for foreign in (
            "project",
            "storage_account",
            "admin_ssh_public_key",
            "permissions_boundary",
            "node_service_account",
            "resource_group",
            "api_max_retries",
            "disk_category",
            "node_role",
        ):
            if foreign not in self.own and getattr(s, foreign) is not None:
                raise ConfigError(f"{self.name}.{foreign} is not a {self.name} setting")
        return s

    # ------------------------------------------------------------------ the bucket
    def default_rendezvous(self) -> str:
        # A fresh, private bucket per cluster (names are global on S3 and GCS).
        return f"{self.scheme}://syndeo-{secrets.token_hex(6)}/{PREFIX}"

    def creates_rendezvous(self, uri: str) -> bool:
        return self.cfg.rendezvous is None

    def _bucket(self, uri: str) -> tuple[str, str]:
        parsed = urlparse(uri)
        if parsed.scheme != self.scheme:
            raise ConfigError(
                f"the {self.name} target meets in {self.scheme}:// buckets; got {uri!r}"
            )
        return parsed.netloc, parsed.path.strip("/")

    # ------------------------------------------------------------------ variables
    def machine_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        s = self.settings
        hint = f"--{{}} or [{self.name}] {{}} in the config"
        missing = [k for k in ("instance_type", "region", "image") if not getattr(s, k)]
        if missing:
            flags = ", ".join(hint.format(k.replace("_", "-"), k) for k in missing)
            raise ConfigError(f"{self.name}: {flags} required")
        bucket, prefix = self._bucket(spec.rendezvous)
        values: dict[str, Any] = {
            "instance_type": s.instance_type,
            "region": s.region,
            "image": s.image,
            "zone": s.zone,
            "spot": s.spot,
            "disk_size_gb": s.disk_size_gb,
            "labels": {"syndeo-cluster": spec.cluster_id, **s.labels},
            "admin_cidrs": s.admin_cidrs,
            "bucket_name": bucket,
            "rendezvous_prefix": prefix,
            "create_bucket": self.creates_rendezvous(spec.rendezvous),
        }
        values.update({k: getattr(s, k) for k in self.own})
        # A group's own instance type (the rest get instance_type); the node settings'
        # groups (terraform/modules/node) carry only their shapes.
        types = self._group_types(spec.layout)
        values["group_instance_types"] = {k: v for k, v in types.items() if v is not None}
        return {**values, **self.cloud_vars(spec)}

    def node_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        # The SIF the image carries: nodes record it in every result's manifest.
        return {} if self.baked_digest is None else {"image_digest": self.baked_digest}

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        """Variables only this cloud has."""
        return {}

    def machine_summary(self, spec: ClusterSpec) -> dict[str, Any]:
        s = self.settings
        summary: dict[str, Any] = {
            "provider": self.name,
            "region": s.region,
            "instance_type": s.instance_type,
            "count": spec.nodes,
            "spot": s.spot,
        }
        if spec.layout is not None:
            # What was billed per group (`invoke compare` prices each type): the type
            # resolved as terraform/<cloud> resolves it.
            types = self._group_types(spec.layout)
            summary["groups"] = [
                {
                    "name": g.name,
                    "instance_type": types[g.name] or s.instance_type,
                    "count": g.nodes,
                }
                for g in spec.layout.groups
            ]
        return summary

    # The digest of the SIF baked into the VM image, where the cloud's image metadata
    # says it (set by check_credentials; None: not known).
    baked_digest: str | None = None

    # ------------------------------------------------------------------ machine states
    # The provider's last answer (monotonic time, the ended ranks with why), and every
    # rank it has listed alive so far (machines_ended).
    _listed: tuple[float, dict[int, str]] | None = None
    _listed_alive: frozenset[int] = frozenset()

    def machines_ended(self, launched: Launched, ranks: list[int]) -> dict[int, str]:
        """The provider's word on the ranks' VMs, from one list request for the cluster
        (:meth:`list_machines`) at most every :data:`OBSERVE_EVERY_S`.

        A rank is ended when its VM is listed stopped or terminated, and none of its
        VMs lives (``replace`` starts the new one before the old one goes).  A rank
        listed alive before and not listed at all now was deleted: a spot VM its
        provider took back (the gcp, azure and alibaba modules delete those; EC2 lists a
        terminated instance for about an hour, then no more)."""
        now = time.monotonic()
        if self._listed is None or now - self._listed[0] >= OBSERVE_EVERY_S:
            machines = self.list_machines(launched)
            if machines is None:
                return {}
            alive = {m.rank for m in machines if m.ended is None}
            ended = {m.rank: m.ended for m in machines if m.ended is not None}
            ended = {r: why for r, why in ended.items() if r not in alive}
            for rank in self._listed_alive - alive - set(ended):
                ended[rank] = f"{self.name} no longer lists its VM (deleted)"
            self._listed, self._listed_alive = (now, ended), self._listed_alive | alive
        return {r: why for r, why in self._listed[1].items() if r in ranks}

    def list_machines(self, launched: Launched) -> list[Machine] | None:
        """Every VM the provider lists with the cluster's ``syndeo-cluster`` tag, in one
        request; None where it cannot be asked or the request failed (then only the
        launcher's clocks tell that a node never came; the next poll asks again)."""
        return None

    def prepare(self, spec: ClusterSpec) -> None:
        self.check_credentials()

    def summary(self, launched: Launched) -> dict[str, Any]:
        # deploy.json: which image ran (the cloud's id and the SIF digest it carries).
        image = {"id": self.settings.image, "digest": self.baked_digest}
        return {**super().summary(launched), "image": image}

    @abstractmethod
    def check_credentials(self) -> str:
        """One clear line if this machine cannot act on the cloud (before anything exists);
        else what was found (identity, image, …), for `check` to show."""
