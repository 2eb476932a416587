"""Google Cloud's pre-flight checks past credentials, APIs and image: the
machine types offered in the zone, the region's vCPU and GPU quota headroom, and the
deployer's permissions.  How each passes, refuses or is skipped: ``cloudcheck.py``.

The reply shapes, from Google's REST references:

* Compute v1 ``regions.get`` (``.../projects/P/regions/R``): a Region with ``zones`` (zone
  URLs) and ``quotas``: ``[{"metric": "CPUS", "limit": 24.0, "usage": 0.0}, ...]``
  (https://cloud.google.com/compute/docs/reference/rest/v1/regions/get; the metric names
  are the Quota.metric enum: CPUS, N2_CPUS, C3_CPUS, PREEMPTIBLE_CPUS, NVIDIA_L4_GPUS, ...).
* Compute v1 ``machineTypes.get`` (``.../projects/P/zones/Z/machineTypes/T``): a MachineType
  with ``guestCpus`` and ``accelerators: [{"guestAcceleratorType": "nvidia-l4",
  "guestAcceleratorCount": 1}]``; 404 where the zone does not offer the type
  (https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/get).
* Cloud Resource Manager v1 ``projects.testIamPermissions``: POST
  ``.../v1/projects/P:testIamPermissions`` with ``{"permissions": [...]}``, answered with
  ``{"permissions": [the subset the caller holds]}``; asking needs no permission
  (https://cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.targets.cloudcheck import deployer_file, first_line

# SYNDEO_GCP_RESOURCEMANAGER_URL points the permission check at a local fake in tests.
RESOURCEMANAGER_URL = "https://cloudresourcemanager.googleapis.com/v1"
# Machine series whose vCPUs count against the region's plain CPUS quota; the other series
# have one of their own (N2_CPUS, C3_CPUS, ...), used when regions.get lists it.  Spot and
# preemptible VMs count against PREEMPTIBLE_CPUS instead when the region grants any
# (its limit > 0), likewise PREEMPTIBLE_<GPU> for their GPUs: Compute Engine's allocation
# quotas page, https://cloud.google.com/compute/resource-usage (CPU, preemptible, GPU quota).
_PLAIN_CPUS = ("e2", "n1", "f1", "g1")
# The GPUs of the machine types terraform/gcp takes GPUs from (a2, a3, g2: machineTypes.get's
# guestAcceleratorType) and older attachable ones -> their regional quota metric (the
# Quota.metric enum).  Another type is said in the summary, not checked.
_GPU_METRICS = {
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-p100": "NVIDIA_P100_GPUS",
    "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
}


@dataclass
class Reply:
    status: int  # 0: no answer at all (why says what went wrong)
    data: Any
    why: str

    @property
    def body(self) -> dict[str, Any] | None:
        return self.data if self.status == 200 and isinstance(self.data, dict) else None


class Api:
    """JSON calls on Google's REST APIs with the caller's application default credentials."""

    def __init__(self, credentials: Any) -> None:
        from google.auth.transport.requests import AuthorizedSession

        self.session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]

    def call(self, url: str, body: dict[str, Any] | None = None) -> Reply:
        from google.auth.exceptions import GoogleAuthError
        from requests import RequestException

        try:
            if body is None:
                reply = self.session.get(url, timeout=30)
            else:
                reply = self.session.post(url, json=body, timeout=30)
        except (GoogleAuthError, RequestException) as exc:
            return Reply(0, None, first_line(exc))
        try:
            data = json.loads(reply.text)
        except ValueError:
            data = None
        return Reply(reply.status_code, data, f"HTTP {reply.status_code}")


def zones_to_try(region: Reply, zone: str | None) -> list[str]:
    """The user's zone; else the region's zones by name, the first being the one
    terraform/gcp takes (google_compute_zones sorts the names; the module takes [0])."""
    if zone:
        return [zone]
    found = region.body or {}
    return sorted(str(z).rstrip("/").rsplit("/", 1)[-1] for z in found.get("zones") or [])


def machine_types(
    api: Api, compute: str, project: str, zones: list[str], types: list[str]
) -> tuple[dict[str, dict[str, Any]], str]:
    """Each type's MachineType in the zone the cluster goes to (its vCPUs and GPUs count
    against the quotas); one line if that zone does not offer a type."""
    if not zones:
        return {}, "machine types not checked (the region's zones were not read)"
    found: dict[str, dict[str, Any]] = {}
    for mtype in types:
        reply = api.call(f"{compute}/projects/{project}/zones/{zones[0]}/machineTypes/{mtype}")
        if reply.status == 404:
            raise ConfigError(_not_offered(api, compute, project, zones, mtype))
        if reply.body is None:
            return {}, f"machine types not checked (machineTypes.get: {reply.why})"
        found[mtype] = reply.body
    return found, f"{', '.join(types)} offered in {zones[0]}"


def _not_offered(api: Api, compute: str, project: str, zones: list[str], mtype: str) -> str:
    listing = f"`gcloud compute machine-types list --filter=name={mtype}` lists the zones"
    others = [
        z
        for z in zones[1:]
        if api.call(f"{compute}/projects/{project}/zones/{z}/machineTypes/{mtype}").status == 200
    ]
    if others:
        return (
            f"gcp: machine type {mtype} is not offered in {zones[0]}, the zone terraform/gcp "
            f'takes first: set [gcp] zone = "{others[0]}" (it offers {mtype}; {listing})'
        )
    return (
        f"gcp: machine type {mtype} is not offered in {' or '.join(zones)}: pick another type, "
        f"zone or region ({listing} that offer it)"
    )


def quota_headroom(
    region: Reply,
    found: dict[str, dict[str, Any]],
    counts: dict[str, int],
    spot: bool,
    where: tuple[str, str],
) -> str:
    """The cluster's vCPUs (and its machine types' GPUs) against the region's quotas less
    their usage; one line if the cluster does not fit."""
    project, region_name = where
    if region.body is None:
        return f"quota not checked (regions.get: {region.why})"
    if not found:
        return "quota not checked (no machine type read)"
    quotas = {
        str(q["metric"]): (float(q.get("limit", 0)), float(q.get("usage", 0)))
        for q in region.body.get("quotas") or []
        if isinstance(q, dict) and "metric" in q
    }
    need: dict[str, int] = {}
    said: list[str] = []
    for mtype, count in counts.items():
        if mtype not in found:
            continue
        for metric, units in _metrics(mtype, found[mtype], spot, quotas, said):
            need[metric] = need.get(metric, 0) + count * units
    for metric, amount in sorted(need.items()):
        if metric not in quotas:
            said.append(f"{metric} quota not listed for {region_name}")
            continue
        limit, usage = quotas[metric]
        if amount > limit - usage:
            raise ConfigError(
                f"gcp: the cluster needs {amount} {metric} in {region_name}, but the quota is "
                f"{limit:.0f} with {usage:.0f} in use: ask for more (metric {metric}, region "
                f"{region_name}: https://console.cloud.google.com/iam-admin/quotas?project="
                f"{project}) or use fewer or smaller nodes"
            )
        said.append(f"{amount} of {limit - usage:.0f} free {metric}")
    return "; ".join(said) or "no quota applies"


def _metrics(
    mtype: str,
    machine: dict[str, Any],
    spot: bool,
    quotas: dict[str, tuple[float, float]],
    said: list[str],
) -> list[tuple[str, int]]:
    """The quota metrics one VM of ``mtype`` counts against, with how much of each."""

    def preemptible(metric: str) -> str:
        granted = quotas.get(f"PREEMPTIBLE_{metric}", (0.0, 0.0))[0] > 0
        return f"PREEMPTIBLE_{metric}" if spot and granted else metric

    series = mtype.split("-")[0].upper()
    own = f"{series}_CPUS"
    cpus = "CPUS" if series.lower() in _PLAIN_CPUS or own not in quotas else own
    cpus = "PREEMPTIBLE_CPUS" if preemptible("CPUS") != "CPUS" else cpus
    out = [(cpus, int(machine.get("guestCpus") or 0))]
    for acc in machine.get("accelerators") or []:
        kind = str(acc.get("guestAcceleratorType", "?"))
        metric = _GPU_METRICS.get(kind)
        if metric is None:
            said.append(f"{kind} GPU quota not checked (no known metric)")
            continue
        out.append((preemptible(metric), int(acc.get("guestAcceleratorCount") or 0)))
    return out


def role_permissions() -> tuple[list[str], str]:
    """The permissions of terraform/gcp/deployer-role.yaml (its includedPermissions list,
    read as plain lines: the launcher does not depend on a YAML parser)."""
    path, shown = deployer_file("gcp", "deployer-role.yaml")
    text = path.read_text().split("includedPermissions:", 1)[-1]
    return re.findall(r"(?m)^\s*-\s*([A-Za-z0-9_.]+)\s*$", text), shown


def missing_permissions(api: Api, base: str, project: str) -> str:
    """The caller holds every permission of the deployer role on the project; one line
    naming the missing ones.  (The role's binding condition, deployer-condition.yaml,
    holds on the project itself: it limits only instances, buckets and objects.)"""
    wanted, shown = role_permissions()
    reply = api.call(f"{base}/projects/{project}:testIamPermissions", {"permissions": wanted})
    if reply.body is None:
        return f"permissions not checked (testIamPermissions: {reply.why})"
    granted = set(reply.body.get("permissions") or [])
    missing = [p for p in wanted if p not in granted]
    if missing:
        raise ConfigError(
            f"gcp: the caller lacks {len(missing)} permission(s) terraform/gcp needs in "
            f"project {project}: {', '.join(missing)}: grant the role in {shown} (the "
            "gcloud commands at its top)"
        )
    return f"all {len(wanted)} permissions of {shown} held"
