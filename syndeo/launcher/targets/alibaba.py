"""Alibaba Cloud: ``terraform/alibaba`` (private VPC, OSS bucket, prefix-scoped RAM role)."""

from __future__ import annotations

from syndeo.launcher.targets.cloud import CloudTarget


class AlibabaTarget(CloudTarget):
    name = "alibaba"
    module = "alibaba"
    replaces_lost = True
    node_resource = "alicloud_instance.node"
    scheme = "oss"
    own = ("disk_category",)

    def check_credentials(self) -> str:
        """Credentials (the standard chain), region, the types offered in a zone, the
        image and its SIF digest (alibabacheck.py), before anything is created."""
        from syndeo.launcher import alibaba_api
        from syndeo.launcher.targets import alibabacheck
        from syndeo.launcher.targets.cloudcheck import type_counts

        s = self.settings
        creds = alibaba_api.credentials()
        region, image = str(s.region), str(s.image)
        alibabacheck.region_known(region, creds)
        offered = alibabacheck.zones_offering(
            region, sorted(type_counts(self)), s.spot, creds, s.zone
        )
        self.baked_digest = alibabacheck.image_digest(region, image, creds)
        return (
            f"credentials from {creds.source}; region {region}; {offered}; image {image} "
            f"(SIF sha256 {self.baked_digest[:12]}); vCPU quota not checked"
        )
