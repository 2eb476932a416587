"""Alibaba Cloud: ``terraform/alibaba`` (private VPC, OSS bucket, prefix-scoped RAM role)."""

from __future__ import annotations

import os
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.spec import ClusterSpec, Launched
from syndeo.launcher.targets.cloud import CloudTarget, Machine

# The oss:// backend reaches the bucket at its region's endpoint (syndeo/rendezvous/oss.py).
REGION_ENV = "ALIBABA_CLOUD_REGION"
# ECS Instance.Status values of a VM that has ended (the others: Pending, Starting, Running).
_ENDED = ("Stopping", "Stopped")


class AlibabaTarget(CloudTarget):
    name = "alibaba"
    module = "alibaba"
    node_resource = "alicloud_instance.node"
    scheme = "oss"
    own = ("disk_category", "node_role")

    def _region_env(self) -> dict[str, str]:
        """The launcher meets the nodes at the bucket's public endpoint in its region
        (the nodes use the internal one, from terraform/alibaba); the shell's own
        ALIBABA_CLOUD_REGION or SYNDEO_OSS_ENDPOINT wins."""
        region = self.settings.region
        if region:
            os.environ.setdefault(REGION_ENV, region)
        return {REGION_ENV: region} if region else {}

    def default_rendezvous(self) -> str:
        self._region_env()
        return super().default_rendezvous()

    def rendezvous_env(self, spec: ClusterSpec) -> dict[str, str]:
        return self._region_env()

    def list_machines(self, launched: Launched) -> list[Machine] | None:
        """ECS ``DescribeInstances`` by the cluster's tag (``Tag.1.Key``/``Tag.1.Value``),
        a page of 100 at a time: ``Instances.Instance[]`` with ``InstanceId``, ``Status``,
        ``OperationLocks.LockReason[]`` (``Recycling``: a spot VM being taken back) and
        ``Tags.Tag[]`` (``TagKey``, ``TagValue``); ``TotalCount``.  Checked against the
        ECS API reference and a local fake only (no Alibaba Cloud account here)."""
        from syndeo.launcher import alibaba_api

        query = {
            "RegionId": str(launched.tf.machines.get("region") or ""),
            "Tag.1.Key": "syndeo-cluster",
            "Tag.1.Value": launched.cluster_id,
            "PageSize": "100",
        }
        found: list[Machine] = []
        try:
            creds = alibaba_api.credentials()
            for page in range(1, 100):
                reply = alibaba_api.call(
                    "DescribeInstances", {**query, "PageNumber": str(page)}, creds
                )
                listed = (reply.get("Instances") or {}).get("Instance") or []
                found += [m for i in listed if (m := _machine(i, launched.cluster_id))]
                if not listed or page * 100 >= int(reply.get("TotalCount") or 0):
                    break
        except (alibaba_api.ApiError, ConfigError, ValueError):
            return None
        return found

    def prepare(self, spec: ClusterSpec) -> None:
        self._region_env()
        super().prepare(spec)

    def check_credentials(self) -> str:
        """Credentials (the standard chain), region, the types offered in a zone, the
        image and its SIF digest (alibabacheck.py), before anything is created."""
        from syndeo.launcher import alibaba_api
        from syndeo.launcher.targets import alibabacheck
        from syndeo.launcher.targets.cloudcheck import type_counts

        s = self.settings
        self._region_env()  # `check` then reaches a bucket named with --rendezvous
        creds = alibaba_api.credentials()
        region, image = str(s.region), str(s.image)
        alibabacheck.region_known(region, creds)
        counts = type_counts(self)
        offered = alibabacheck.zones_offering(region, sorted(counts), s.spot, creds, s.zone)
        quota = alibabacheck.vcpu_headroom(region, counts, s.spot, creds)
        self.baked_digest = alibabacheck.image_digest(region, image, creds)
        return (
            f"credentials from {creds.source}; region {region}; {offered}; {quota}; "
            f"image {image} (SIF sha256 {self.baked_digest[:12]})"
        )


def _machine(instance: dict[str, Any], cluster_id: str) -> Machine | None:
    """An ECS instance of the cluster by its tags (None: not one of its nodes)."""
    tags = {t.get("TagKey"): t.get("TagValue") for t in (instance.get("Tags") or {}).get("Tag", [])}
    locks = (instance.get("OperationLocks") or {}).get("LockReason") or []
    status = str(instance.get("Status", ""))
    if any(lock.get("LockReason") == "Recycling" for lock in locks):
        state: str | None = "Recycling (a spot instance being taken back)"
    else:
        state = status if status in _ENDED else None
    said = (
        None if state is None else f"ECS lists its instance {instance.get('InstanceId')} as {state}"
    )
    return Machine.tagged(tags, cluster_id, said)
