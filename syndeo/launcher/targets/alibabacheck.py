"""``check --target alibaba`` (and deploy/up before anything exists): the region is one
the account can use, every instance type of the cluster is offered for creation in one
zone (spot or pay-as-you-go, as asked), and the image exists and carries the SIF digest
packer/cloud tags it with.

ECS API 2014-05-26 (RPC), the reply shapes read here:
- DescribeRegions: ``Regions.Region[].RegionId``.
- DescribeAvailableResource (DestinationResource=InstanceType): ``AvailableZones.
  AvailableZone[]`` with ``ZoneId``, ``StatusCategory`` (WithStock, ClosedWithStock,
  WithoutStock, ClosedWithoutStock) and ``AvailableResources.AvailableResource[].
  SupportedResources.SupportedResource[]`` (``Value`` the type, ``StatusCategory``).
- DescribeImages (ImageId): ``Images.Image[]`` with ``Tags.Tag[]`` (``TagKey``,
  ``TagValue``).
- DescribeInstanceTypes (InstanceTypes.N): ``InstanceTypes.InstanceType[]`` with
  ``InstanceTypeId`` and ``CpuCoreCount`` (its vCPUs).
- DescribeAccountAttributes (AttributeName.N): ``AccountAttributeItems.
  AccountAttributeItem[]`` with ``AttributeName`` and ``AttributeValues.ValueItem[].
  Value``; the region's vCPU quota is ``max-postpaid-instance-vcpu-count`` (spot:
  ``max-spot-instance-vcpu-count``), what runs ``used-postpaid-instance-vcpu-count``
  (``used-spot-instance-vcpu-count``).
"""

from __future__ import annotations

import re
from typing import Any

from syndeo.core.errors import ConfigError
from syndeo.launcher.alibaba_api import ApiError, call
from syndeo.rendezvous.alicreds import Credentials

# The tag packer/cloud gives the image: the sha256 of the SIF baked into it.
DIGEST_TAG = "syndeo-image-digest"
_SHA256 = re.compile(r"^(sha256:)?([0-9a-f]{64})$")


def _items(reply: Any, *path: str) -> list[dict[str, Any]]:
    for key in path:
        reply = reply.get(key, {}) if isinstance(reply, dict) else {}
    return [x for x in reply if isinstance(x, dict)] if isinstance(reply, list) else []


def region_known(region: str, creds: Credentials) -> None:
    try:
        reply = call("DescribeRegions", {}, creds)
    except ApiError as exc:
        raise ConfigError(f"alibaba: cannot list regions ({exc}): check the credentials") from None
    known = sorted(str(r.get("RegionId")) for r in _items(reply, "Regions", "Region"))
    if region not in known:
        raise ConfigError(
            f"alibaba: unknown region {region!r} (this account has {', '.join(known)})"
        )


def zones_offering(
    region: str, types: list[str], spot: bool, creds: Credentials, zone: str | None
) -> str:
    """The zones that offer every type; one line naming the type none offers."""
    common: set[str] | None = None
    for itype in types:
        params = {
            "RegionId": region,
            "DestinationResource": "InstanceType",
            "InstanceType": itype,
            "InstanceChargeType": "PostPaid",
            "SpotStrategy": "SpotAsPriceGo" if spot else "NoSpot",
            "ResourceType": "instance",
        }
        try:
            reply = call("DescribeAvailableResource", params, creds)
        except ApiError as exc:
            return f"instance types not checked ({exc})"
        zones = {
            str(z.get("ZoneId"))
            for z in _items(reply, "AvailableZones", "AvailableZone")
            if z.get("StatusCategory") == "WithStock" and _offers(z, itype)
        }
        if zone is not None:
            zones &= {zone}
        if not zones:
            where = f"zone {zone}" if zone else f"any zone of {region}"
            kind = "spot" if spot else "pay-as-you-go"
            raise ConfigError(f"alibaba: {itype} is not offered ({kind}, in stock) in {where}")
        common = zones if common is None else common & zones
    if not common:
        raise ConfigError(f"alibaba: no zone of {region} offers all of {', '.join(types)}")
    return f"{', '.join(types)} offered in {', '.join(sorted(common))}"


def _offers(zone: dict[str, Any], itype: str) -> bool:
    for res in _items(zone, "AvailableResources", "AvailableResource"):
        for sup in _items(res, "SupportedResources", "SupportedResource"):
            if sup.get("Value") == itype and sup.get("StatusCategory") == "WithStock":
                return True
    return False


def image_digest(region: str, image: str, creds: Credentials) -> str:
    """The SIF digest the image is tagged with; one line if the image or tag is missing."""
    params = {"RegionId": region, "ImageId": image, "ImageOwnerAlias": "self"}
    try:
        reply = call("DescribeImages", params, creds)
    except ApiError as exc:
        raise ConfigError(f"alibaba: cannot look up image {image} ({exc})") from None
    images = _items(reply, "Images", "Image")
    if not images:
        raise ConfigError(
            f"alibaba: image {image} does not exist in {region} (or is not yours): build it "
            "with packer/cloud (packer/README.md) or copy it to this region"
        )
    tags = {str(t.get("TagKey")): str(t.get("TagValue")) for t in _items(images[0], "Tags", "Tag")}
    found = _SHA256.match(tags.get(DIGEST_TAG, ""))
    if found is None:
        raise ConfigError(
            f"alibaba: image {image} has no {DIGEST_TAG} tag (the SIF's sha256): build it "
            "with packer/cloud, which tags it"
        )
    return found.group(2)


def vcpu_headroom(region: str, counts: dict[str, int], spot: bool, creds: Credentials) -> str:
    """The cluster's vCPUs fit the region's vCPU quota less what runs; one line if not.
    A quota that cannot be read is "not checked" (the apply meets the real answer)."""
    kind = "spot" if spot else "postpaid"
    types = sorted(counts)
    params = {"RegionId": region, **{f"InstanceTypes.{i + 1}": t for i, t in enumerate(types)}}
    names = (f"max-{kind}-instance-vcpu-count", f"used-{kind}-instance-vcpu-count")
    attrs = {"RegionId": region, "AttributeName.1": names[0], "AttributeName.2": names[1]}
    try:
        shapes = call("DescribeInstanceTypes", params, creds)
        account = call("DescribeAccountAttributes", attrs, creds)
    except ApiError as exc:
        return f"vCPU quota not checked ({exc})"
    vcpus = {
        str(t.get("InstanceTypeId")): int(t.get("CpuCoreCount") or 0)
        for t in _items(shapes, "InstanceTypes", "InstanceType")
    }
    values: dict[str, int] = {}
    for item in _items(account, "AccountAttributeItems", "AccountAttributeItem"):
        found = _items(item, "AttributeValues", "ValueItem")
        if found and str(found[0].get("Value", "")).isdigit():
            values[str(item.get("AttributeName"))] = int(found[0]["Value"])
    if any(t not in vcpus for t in types) or names[0] not in values:
        return "vCPU quota not checked (no answer for every type)"
    needed = sum(vcpus[t] * n for t, n in counts.items())
    free = values[names[0]] - values.get(names[1], 0)
    if needed > free:
        raise ConfigError(
            f"alibaba: the cluster needs {needed} vCPUs ({kind}) but {region} has {free} of "
            f"its quota of {values[names[0]]} left: ask for more (Quota Center) or use fewer"
        )
    return f"{needed} vCPUs of {free} left in the {kind} quota"
