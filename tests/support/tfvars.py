"""Minimal valid inputs of each cloud root module (what the tests of variables start from)."""

from __future__ import annotations

from typing import Any

BASE: dict[str, dict[str, Any]] = {
    "aws": {
        "image": "ami-0123456789abcdef0",
        "region": "us-east-1",
        "instance_type": "c7i.2xlarge",
    },
    "gcp": {
        "image": "projects/my-project/global/images/family/syndeo",
        "region": "us-central1",
        "instance_type": "c3-standard-8",
        "project": "my-project-123",
    },
    "azure": {
        "image": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
        "images/providers/Microsoft.Compute/images/syndeo-20261122",
        "region": "westeurope",
        "instance_type": "Standard_D8s_v5",
        "admin_ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDqz",
    },
}
BASE["alibaba"] = {
    "image": "m-bp1g7004ksh0oeuc1234",
    "region": "cn-hangzhou",
    "instance_type": "ecs.g7.2xlarge",
}
COMMON = {"node": {"cluster_id": "c1", "node_count": 3}, "bucket_name": "syndeo-c1-test"}
