"""A bucket a cloud module creates keeps the cluster's live records while it runs.

The head publishes its record and the sealed store token once, the launcher seals the
TLS CA once, and a job's packages are stored once; a node that joins days later (a
replacement, a node the autoscaler adds) reads them all.  A lifecycle rule that expires
current objects after N days (7 by default until now) would leave such a node without a
head to join on day N+1.  So the only rules are for what no running cluster reads: the
old versions of rewritten records (with bucket_versioning) and incomplete uploads.
Destroy removes the bucket, and the records with it.

Checked on the modules' own text here (no cloud runs lifecycle rules in this bed: moto
stores them and never applies them); the AWS module's plan is asserted in
terraform/aws/tests/aws.tftest.hcl.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import hcl

TF = Path(__file__).resolve().parents[2] / "terraform"
# The resource holding each cloud's rules, and what in it would delete a live record.
RULES = {
    "aws": ("aws_s3_bucket_lifecycle_configuration", {"expiration"}),
    "gcp": ("google_storage_bucket", {"age", "created_before", "days_since_custom_time"}),
    "azure": ("azurerm_storage_management_policy", {"base_blob"}),
    "alibaba": ("alicloud_oss_bucket", {"expiration"}),
}


def _keys(value: Any) -> Iterator[str]:
    """Every block and attribute name at any depth (dynamic blocks' content included)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def _bodies(cloud: str, kind: str) -> list[dict[str, Any]]:
    module = TF / cloud
    return [
        b
        for f in hcl.tf_files(module)
        if f.parent == module
        for t, _, b in hcl.resources(f)
        if t == kind
    ]


@pytest.mark.parametrize("cloud", sorted(RULES))
def test_no_rule_deletes_a_running_clusters_records(cloud: str) -> None:
    kind, deleting = RULES[cloud]
    [body] = _bodies(cloud, kind)
    if cloud == "gcp":  # an age also times the incomplete uploads' abort: Delete rules only
        body = [r for r in body["lifecycle_rule"] if "Delete" in str(r["action"])]
    found = deleting & set(_keys(body))
    assert not found, f"{cloud}: {kind} deletes live records ({', '.join(sorted(found))})"
    assert "record_expiry_days" not in hcl.variables(TF / cloud)


@pytest.mark.parametrize("cloud", sorted(RULES))
def test_old_versions_still_go(cloud: str) -> None:
    # Status records are rewritten every few seconds: with versioning, each rewrite
    # leaves an old version, which a rule removes after a day.
    kind, _ = RULES[cloud]
    [body] = _bodies(cloud, kind)
    keys = set(_keys(body))
    assert keys & {"noncurrent_version_expiration", "days_since_noncurrent_time", "version"}, cloud
