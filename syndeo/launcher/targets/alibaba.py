"""Alibaba Cloud: ``terraform/alibaba`` (private VPC, OSS bucket, prefix-scoped RAM role)."""

from __future__ import annotations

import os

from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.cloud import CloudTarget

# The oss:// backend reaches the bucket at its region's endpoint (syndeo/rendezvous/oss.py).
REGION_ENV = "ALIBABA_CLOUD_REGION"


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
