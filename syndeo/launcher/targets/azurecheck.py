"""Azure's pre-flight checks past the login, subscription and image: the
resource providers registered, the VM sizes offered, the region's vCPU quota headroom, and
the deployer's permissions on its resource group -- all through the ``az`` CLI the login
already needs.  How each passes, refuses or is skipped: ``cloudcheck.py``.

The reply shapes (``-o json`` prints the ARM objects; ``-o tsv`` with ``--query`` a bare
value):

* ``az provider show --namespace NS --query registrationState -o tsv``: ``Registered``,
  ``NotRegistered``, ``Registering``, ... (ARM Providers - Get, the Provider's
  registrationState: https://learn.microsoft.com/rest/api/resources/providers/get).
* ``az vm list-skus --location L --size SIZE --resource-type virtualMachines -o json``:
  ResourceSku objects, ``[{"name": "Standard_D8s_v5", "family": "standardDSv5Family",
  "capabilities": [{"name": "vCPUs", "value": "8"}, ...], "restrictions": [{"type":
  "Location", "reasonCode": "NotAvailableForSubscription", ...}]}]``; ``--size`` also
  matches partial names (Resource Skus - List:
  https://learn.microsoft.com/rest/api/compute/resource-skus/list; az vm list-skus).
* ``az vm list-usage --location L -o json``: Usage objects, ``[{"name": {"value": "cores",
  "localizedValue": "Total Regional vCPUs"}, "currentValue": 4, "limit": 10}, ...]`` with
  one per VM family (``standardDSv5Family``) and ``lowPriorityCores`` for spot (Usage -
  List: https://learn.microsoft.com/rest/api/compute/usage/list).
* ``az rest --method get --url .../resourceGroups/RG/providers/Microsoft.Authorization/
  permissions?api-version=2022-04-01``: ``{"value": [{"actions": [...], "notActions":
  [...], "dataActions": [...], "notDataActions": [...]}]}``, the caller's permissions on the
  group, wildcards as granted (Permissions - List For Resource Group:
  https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group).
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.targets.cloudcheck import deployer_file, first_line

# What terraform/azure creates through; it registers none of them itself
# (resource_provider_registrations = "none": a subscription-wide right).
PROVIDERS = (
    "Microsoft.Compute",
    "Microsoft.Network",
    "Microsoft.Storage",
    "Microsoft.ManagedIdentity",
)
ARM = "https://management.azure.com"


@dataclass
class Az:
    """The ``az`` CLI, one call at a time."""

    path: str
    subscription: str

    def run(self, *args: str, timeout: float = 120) -> tuple[str | None, str]:
        """The output, or None and the CLI's first error line."""
        try:
            out = subprocess.run(
                [self.path, *args], capture_output=True, text=True, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, first_line(exc)
        if out.returncode != 0:
            lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
            return None, lines[0].removeprefix(
                "ERROR: "
            ) if lines else f"az exited {out.returncode}"
        return out.stdout, ""

    def json(self, *args: str, timeout: float = 120) -> tuple[Any, str]:
        text, why = self.run(*args, "--output", "json", timeout=timeout)
        if text is None:
            return None, why
        try:
            return json.loads(text or "null"), ""
        except ValueError:
            return None, "az printed no JSON"


def unregistered_providers(az: Az) -> str:
    """Each provider terraform/azure needs is registered; one line with the commands."""
    missing: list[str] = []
    for namespace in PROVIDERS:
        state, why = az.run(
            "provider",
            "show",
            "--namespace",
            namespace,
            "--query",
            "registrationState",
            "--output",
            "tsv",
        )
        if state is None:
            return f"resource providers not checked ({why})"
        if state.strip() != "Registered":
            missing.append(namespace)
    if missing:
        commands = " && ".join(f"az provider register --namespace {ns}" for ns in missing)
        raise ConfigError(
            f"azure: {', '.join(missing)} not registered in subscription {az.subscription} "
            f"(terraform/azure registers none): {commands} (once, by someone who may)"
        )
    return f"{', '.join(p.removeprefix('Microsoft.') for p in PROVIDERS)} registered"


def location_of(az: Az, group: str | None, region: str) -> str:
    """Where the VMs go: a given resource group's location (terraform/azure puts every
    resource there), else the region; one line if the group does not exist."""
    if group is None:
        return region
    found, why = az.run("group", "show", "--name", group, "--query", "location", "--output", "tsv")
    if found is None and "ResourceGroupNotFound" in why:
        raise ConfigError(
            f"azure: resource group {group} does not exist in subscription {az.subscription}: "
            f"create it (az group create --name {group} --location {region}) or name another "
            "([azure] resource_group)"
        )
    return found.strip() if found and found.strip() else region


def vm_sizes(az: Az, location: str, sizes: list[str]) -> tuple[dict[str, dict[str, Any]], str]:
    """Each size's SKU in the location (its vCPUs and family count against the quotas);
    one line if the location does not offer a size to this subscription."""
    found: dict[str, dict[str, Any]] = {}
    for size in sizes:
        skus, why = az.json(
            "vm",
            "list-skus",
            "--location",
            location,
            "--size",
            size,
            "--resource-type",
            "virtualMachines",
        )
        if not isinstance(skus, list):
            return {}, f"VM sizes not checked ({why or 'no SKU list'})"
        sku = next((s for s in skus if str(s.get("name", "")).lower() == size.lower()), None)
        if sku is None or _restricted(sku):
            raise ConfigError(
                f"azure: VM size {size} is not offered in {location} to subscription "
                f"{az.subscription}: pick another size or region (`az vm list-skus --location "
                f"{location} --resource-type virtualMachines --output table` lists those offered)"
            )
        found[size] = sku
    return found, f"{', '.join(sizes)} offered in {location}"


def _restricted(sku: dict[str, Any]) -> bool:
    """The whole location is closed to the subscription (a zone restriction is not)."""
    return any(r.get("type") == "Location" for r in sku.get("restrictions") or [])


def _vcpus(sku: dict[str, Any]) -> int:
    caps = {c.get("name"): c.get("value") for c in sku.get("capabilities") or []}
    return int(caps.get("vCPUs") or 0)


def quota_headroom(
    az: Az, location: str, found: dict[str, dict[str, Any]], counts: dict[str, int], spot: bool
) -> str:
    """The cluster's vCPUs against the location's quotas less their use: the regional
    total and each size's family on demand, the low-priority total for spot."""
    if not found:
        return "vCPU quota not checked (no VM size read)"
    usage, why = az.json("vm", "list-usage", "--location", location)
    if not isinstance(usage, list):
        return f"vCPU quota not checked ({why or 'no usage list'})"
    need: dict[str, int] = {}
    for size, count in counts.items():
        sku = found.get(size)
        if sku is None:
            continue
        family = str(sku.get("family") or "")
        names = ["lowPriorityCores"] if spot else ["cores", *([family] if family else [])]
        for name in names:
            need[name] = need.get(name, 0) + count * _vcpus(sku)
    quotas = {str(u.get("name", {}).get("value")): u for u in usage if isinstance(u, dict)}
    said: list[str] = []
    for name, vcpus in sorted(need.items()):
        quota = quotas.get(name)
        if quota is None:
            said.append(f"{name} quota not listed")
            continue
        limit, used = int(quota.get("limit") or 0), int(quota.get("currentValue") or 0)
        title = quota.get("name", {}).get("localizedValue") or name
        if vcpus + used > limit:
            raise ConfigError(
                f"azure: the cluster needs {vcpus} vCPUs of {title} ({name}) in {location}, "
                f"but the quota is {limit} with {used} in use: ask for more (`az quota update "
                f"--resource-name {name} --scope /subscriptions/{az.subscription}/providers/"
                f"Microsoft.Compute/locations/{location} --limit-object value={vcpus + used}`, "
                "or the portal's Quotas page) or use fewer or smaller nodes"
            )
        said.append(f"{vcpus} of {limit - used} free vCPUs of {title}")
    return "; ".join(said)


def role_actions() -> tuple[list[str], str]:
    path, shown = deployer_file("azure", "deployer-role.json")
    return [str(a) for a in json.loads(path.read_text())["Actions"]], shown


def granted(action: str, permissions: list[dict[str, Any]]) -> bool:
    """Whether one of the caller's permission entries allows ``action``: an action
    pattern matches it ("*" spans any characters, case-insensitively, as in ARM) and
    none of that entry's notActions does."""

    def matches(patterns: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(action.lower(), p.lower()) for p in patterns)

    return any(
        matches(p.get("actions") or []) and not matches(p.get("notActions") or [])
        for p in permissions
    )


def missing_actions(az: Az, group: str | None) -> str:
    """The caller may do every action of deployer-role.json on its resource group; one
    line naming the missing ones."""
    if group is None:
        # terraform/azure then creates the cluster's own group: a subscription-wide right
        # that deployer-role.json (granted on one existing group) never holds.
        return "permissions not checked (no [azure] resource_group to check them on)"
    url = (
        f"{ARM}/subscriptions/{az.subscription}/resourceGroups/{group}/providers/"
        "Microsoft.Authorization/permissions?api-version=2022-04-01"
    )
    reply, why = az.json("rest", "--method", "get", "--url", url)
    if not isinstance(reply, dict):
        return f"permissions not checked ({why or 'no permission list'})"
    held = [p for p in reply.get("value") or [] if isinstance(p, dict)]
    wanted, shown = role_actions()
    missing = [a for a in wanted if not granted(a, held)]
    if missing:
        raise ConfigError(
            f"azure: the caller lacks {len(missing)} action(s) terraform/azure needs on "
            f"resource group {group}: {', '.join(missing)}: assign the role in {shown} on "
            "that group (terraform/azure/README.md)"
        )
    return f"all {len(wanted)} actions of {shown} held on {group}"
