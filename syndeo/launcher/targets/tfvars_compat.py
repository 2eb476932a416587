"""A cluster's saved tfvars in today's shape, whatever shape the launcher that started it
wrote: ``down``, ``grow``, ``shrink`` and a replacement apply today's modules to them.

Two older shapes exist.  Before the node settings were one object, each was a
variable of its own at the top level (``cluster_name`` for the cluster id) and a cloud
group's instance type rode in its ``groups`` entry; then ``node`` held ``dashboard``,
which is now a setting every node shares (``node.settings``, ClusterOptions).  Without
this, a cluster started by an older launcher could not be taken down by a newer one:
Terraform refuses variables its module no longer declares.
"""

from __future__ import annotations

import copy
from typing import Any

# The node settings as top-level variables, in the oldest shape (a fixed list: new
# settings are never added here).
_FLAT_NODE = (
    "node_count",
    "rendezvous",
    "cpus_per_node",
    "gpus_per_node",
    "memory_mb_per_node",
    "object_store_mb_per_node",
    "join_timeout_s",
    "run",
    "not_before",
    "extra_env",
    "groups",
    "grown",
    "dashboard",
    "node_ips",
    "image_digest",
    "host_dir",
    "python",
    "scratch_dir",
    "workdir",
)
# Attributes of `node` that moved into node.settings.
_NOW_SETTINGS = ("dashboard",)


def current_tfvars(saved: dict[str, Any]) -> dict[str, Any]:
    """``saved`` in today's shape (a copy; today's shape comes back unchanged)."""
    tfvars = copy.deepcopy(saved)
    if "node" not in tfvars:
        node = {k: tfvars.pop(k) for k in _FLAT_NODE if k in tfvars}
        node["cluster_id"] = tfvars.pop("cluster_name")
        types = {g["name"]: g.pop("instance_type") for g in node.get("groups", [])}
        if any(types.values()):  # a cloud's groups (ssh's never had a type)
            tfvars["group_instance_types"] = {k: v for k, v in types.items() if v is not None}
        tfvars["node"] = node
    node = tfvars["node"]
    moved = {k: node.pop(k) for k in _NOW_SETTINGS if k in node}
    if moved:
        node["settings"] = {**node.get("settings", {}), **moved}
    return tfvars
