"""Azure: ``terraform/azure`` (private VNet, blob container, container-scoped identity)."""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.cloud import CloudTarget, Machine

# The tag packer/cloud gives the managed image: the sha256 of the SIF baked into it.
DIGEST_TAG = "syndeo-image-digest"
# Terraform's azurerm provider authenticates from these, or from an `az login` session.
_ENV_LOGINS = ("ARM_CLIENT_ID", "ARM_USE_MSI", "ARM_USE_OIDC", "AZURE_CLIENT_ID")
# A VM ARM id: the head's (terraform/azure's node_ids output) names where the nodes are.
_ARM_ID = re.compile(r"^/subscriptions/([^/]+)/resourceGroups/([^/]+)/", re.IGNORECASE)


class AzureTarget(CloudTarget):
    name = "azure"
    module = "azure"
    node_resource = "azurerm_linux_virtual_machine.node"
    scheme = "az"
    own = ("storage_account", "admin_ssh_public_key", "resource_group")

    def default_rendezvous(self) -> str:
        # The launcher follows the cluster in the container it creates, so it must
        # know the storage account: choose its name here (3-24 lowercase letters and
        # digits, globally unique) where the az:// backend looks for it.
        account = self.settings.storage_account or f"syndeo{secrets.token_hex(8)}"
        os.environ.setdefault("AZURE_STORAGE_ACCOUNT", account)
        return super().default_rendezvous()

    def cloud_vars(self, spec: ClusterSpec) -> dict[str, Any]:
        account = self.settings.storage_account or os.environ.get("AZURE_STORAGE_ACCOUNT")
        if not account:
            raise ConfigError("azure: name the storage account ([azure] storage_account)")
        key = self.settings.admin_ssh_public_key or self._throwaway_public_key
        return {"storage_account": account, "admin_ssh_public_key": key}

    @functools.cached_property
    def _throwaway_public_key(self) -> str:
        """The public half of a fresh ed25519 key whose private half is never kept.

        Azure insists on an admin key once passwords are off, but nobody logs in to a
        node (admin access is through Bastion): a key generated in Terraform would keep
        its private half in the state, readable by whoever reads the state.  One key
        per launch, the same for every call of this target (the tfvars are written once
        and grow reuses them, so no VM is replaced for a new key)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        public = Ed25519PrivateKey.generate().public_key()
        raw = public.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        return raw.decode()

    def rendezvous_env(self, spec: ClusterSpec) -> dict[str, str]:
        # Chosen in default_rendezvous, in this process only: `down` from a new shell
        # could not open the container without it.
        return {"AZURE_STORAGE_ACCOUNT": str(self.cloud_vars(spec)["storage_account"])}

    def list_machines(self, launched: Launched) -> list[Machine] | None:
        """``az vm list --resource-group RG --show-details``: the VMs of the group the head
        is in, each with ``tags``, ``provisioningState`` and ``powerState`` ("VM
        running", "VM deallocated", "VM stopped", ...; Virtual Machines - List and
        Instance View - Get: https://learn.microsoft.com/rest/api/compute/virtual-machines/
        list, az vm list -d).  Through the ``az`` login, as the pre-flight checks; None
        without one.  Checked against those references and a stand-in ``az`` only (no
        Azure subscription here)."""
        from syndeo.launcher.targets import azurecheck

        az = shutil.which("az")
        head = (launched.tf.outputs.get("node_ids") or [""])[0]
        where = _ARM_ID.match(str(head or ""))
        if az is None or where is None:
            return None
        vms, _ = azurecheck.Az(az, where.group(1)).json(
            *("vm", "list", "--subscription", where.group(1)),
            *("--resource-group", where.group(2), "--show-details"),
            timeout=30,  # the watcher's poll waits for it, as for the other clouds' requests
        )
        if not isinstance(vms, list):
            return None
        return [m for vm in vms if (m := _machine(vm, launched.cluster_id)) is not None]

    def check_credentials(self) -> str:
        az = shutil.which("az")
        logged_in = (Path.home() / ".azure" / "azureProfile.json").is_file() and az
        if not logged_in and not any(os.environ.get(v) for v in _ENV_LOGINS):
            raise ConfigError(
                "azure: no Azure login found (az login, or ARM_CLIENT_ID/ARM_CLIENT_SECRET/"
                "ARM_TENANT_ID/ARM_SUBSCRIPTION_ID for a service principal)"
            )
        # azurerm 4.x requires the subscription (an `az login` alone no longer names it):
        # ARM_SUBSCRIPTION_ID, else the CLI's current one (read from its local profile),
        # handed to Terraform through this process's environment.
        subscription = os.environ.get("ARM_SUBSCRIPTION_ID") or (
            _az_subscription(az) if logged_in and az else None
        )
        if not subscription:
            raise ConfigError(
                "azure: no subscription: set ARM_SUBSCRIPTION_ID, or choose one with "
                "`az account set --subscription <id>` (azurerm 4.x needs it)"
            )
        os.environ["ARM_SUBSCRIPTION_ID"] = subscription
        if not (logged_in and az):
            # A service principal without a CLI login: nothing here reads ARM, so the
            # image and its digest are first seen by Terraform.
            return (
                f"subscription {subscription}; image, providers, VM sizes, quota and "
                "permissions not looked up (no az login)"
            )
        self.baked_digest = _image_digest(az, str(self.settings.image))
        digest = (
            f"SIF sha256 {self.baked_digest[:12]}" if self.baked_digest else "no SIF digest tag"
        )
        return (
            f"subscription {subscription}; image {self.settings.image} ({digest}); "
            f"{self._preflight(az, subscription)}"
        )

    def _preflight(self, az_path: str, subscription: str) -> str:
        """Resource providers, VM sizes, vCPU quota and the deployer's permissions
        (azurecheck.py), before anything is created."""
        from syndeo.launcher.targets import azurecheck
        from syndeo.launcher.targets.cloudcheck import type_counts

        s = self.settings
        az = azurecheck.Az(az_path, subscription)
        providers = azurecheck.unregistered_providers(az)
        location = azurecheck.location_of(az, s.resource_group, str(s.region))
        counts = type_counts(self)
        found, offered = azurecheck.vm_sizes(az, location, sorted(counts))
        quota = azurecheck.quota_headroom(az, location, found, counts, s.spot)
        rights = azurecheck.missing_actions(az, s.resource_group)
        return f"{providers}; {offered}; {quota}; {rights}"


def _image_digest(az: str, image: str) -> str | None:
    """The SIF digest packer/cloud tags the image with (``syndeo-image-digest``), read
    with ``az resource show`` (any resource id: a managed image or a gallery version);
    one line when the image cannot be read."""
    try:
        out = subprocess.run(
            [az, "resource", "show", "--ids", image, "--query", "tags", "--output", "json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"azure: cannot look up image {image}: {exc}") from None
    if out.returncode != 0:
        why = next((ln for ln in out.stderr.splitlines() if ln.strip()), "az failed")
        raise ConfigError(f"azure: cannot read image {image}: {why.strip()}")
    try:
        tags = json.loads(out.stdout or "null") or {}
    except ValueError:
        tags = {}
    value = tags.get(DIGEST_TAG) if isinstance(tags, dict) else None
    return str(value) if value else None


def _az_subscription(az: str) -> str | None:
    """The Azure CLI's current subscription id (``az account show``), or None."""
    try:
        out = subprocess.run(
            [az, "account", "show", "--query", "id", "--output", "tsv"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None


def _machine(vm: dict[str, Any], cluster_id: str) -> Machine | None:
    """A VM of the cluster by its tags (None: not one of its nodes); ended once
    deallocated, stopped or failed to provision."""
    power = str(vm.get("powerState") or "")
    failed = str(vm.get("provisioningState") or "") == "Failed"
    ended = None
    if failed or any(w in power for w in ("deallocat", "stopp")):
        state = "failed to provision" if failed else power.removeprefix("VM ")
        ended = f"Azure lists its VM {vm.get('name')} as {state}"
    return Machine.tagged(vm.get("tags") or {}, cluster_id, ended)
