"""Azure node identities reach only their cluster's prefix, as the
AWS and GCP node roles already do: the node's role assignment on the container carries
an ABAC condition (version 2.0) on the blob path and the list prefix.

Checked on the parsed HCL only: the azurerm provider cannot be downloaded here, so the
condition's syntax is verified against Microsoft's documentation, not against Azure.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support import hcl

AZURE = hcl.TERRAFORM / "azure"
ACTIONS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"


def _assignment(name: str) -> dict[str, Any]:
    for path in hcl.tf_files(AZURE):
        for rtype, rname, body in hcl.resources(path):
            if rtype == "azurerm_role_assignment" and rname == name:
                return body
    raise AssertionError(f"no azurerm_role_assignment.{name} in terraform/azure")


def _locals() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in hcl.tf_files(AZURE):
        for block in hcl.load(path).get("locals", []):
            out.update(block)
    return out


def test_the_nodes_assignment_is_conditioned_on_the_clusters_prefix() -> None:
    body = _assignment("nodes_container")
    assert hcl.unquote(body.get("condition_version")) == "2.0"
    assert hcl.unquote(body.get("condition")) == "${local.node_blob_condition}"
    prefix = hcl.unquote(_locals()["node_blob_prefix"])
    # <prefix>/<cluster>/ (or <cluster>/ at the root): the keys of syndeo/rendezvous/_cloud.py.
    assert prefix == (
        '${local.prefix == "" ? "${local.cluster_id}/" : "${local.prefix}/${local.cluster_id}/"}'
    )
    condition = " ".join(str(hcl.unquote(_locals()["node_blob_condition"])).split())
    path_rule = f"@Resource[{ACTIONS}:path] StringStartsWith '${{local.node_blob_prefix}}'"
    list_rule = f"@Request[{ACTIONS}:prefix] StringStartsWith '${{local.node_blob_prefix}}'"
    assert path_rule in condition and list_rule in condition
    # Every data action the role grants on blobs is named in a clause (read, list,
    # write, append, delete, move): none passes unconditioned.
    named = set(re.findall(r"ActionMatches\{'" + re.escape(ACTIONS) + r"/([a-z/]+)'\}", condition))
    assert named == {"read", "write", "add/action", "delete", "move/action"}
    assert "SubOperationMatches{'Blob.List'}" in condition
    assert condition.count("(") == condition.count(")")


def test_the_deployers_own_assignment_stays_container_wide() -> None:
    # The launcher collects results and cleans up: it keeps the whole container.
    assert "condition" not in _assignment("deployer_container")
