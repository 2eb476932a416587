"""The targets, declared once: the names the config, the node settings, the price
catalog, the cost comparison, the Terraform node module's rules (scripts/tf_generate.py)
and the tests take them from.  A new cloud is a name here, its Terraform module, its
target class (syndeo/launcher/targets/) and its config sections."""

from __future__ import annotations

import typing
from typing import Literal

Cloud = Literal["aws", "gcp", "azure", "alibaba"]
OnPrem = Literal["local", "slurm", "ssh"]
# One flat Literal (a union of the two would make pydantic's error name both halves);
# the assertion below keeps it the two lists' sum.
TargetName = Literal["local", "slurm", "ssh", "aws", "gcp", "azure", "alibaba"]

CLOUDS: tuple[str, ...] = typing.get_args(Cloud)
ONPREM: tuple[str, ...] = typing.get_args(OnPrem)
TARGETS: tuple[str, ...] = ONPREM + CLOUDS
assert typing.get_args(TargetName) == TARGETS, "TargetName must list ONPREM then CLOUDS"
# The clouds whose VMs power themselves off after autostop plus its grace when the
# watcher is gone (syndeo/node/poweroff.py; docs/autoscale.md says what each bills
# then).  Not alibaba: what a guest power-off costs there was not checked.
POWERS_OFF: tuple[str, ...] = ("aws", "gcp", "azure")
