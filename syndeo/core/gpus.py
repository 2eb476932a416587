"""One GPU rule for every target: a node that asks for G GPUs sees exactly its G devices.

Ray takes the node's GPU ids from its vendor's variable (NVIDIA: ``CUDA_VISIBLE_DEVICES``;
AMD: ``HIP_VISIBLE_DEVICES``) when its raylet starts and hands each ``num_gpus`` task its
share of them, so a node started with exactly its devices visible (and ``--num-gpus=G``)
never sells a GPU twice.  Where nodes share a machine (the local target) the launcher
splits the machine's devices between them; on Slurm the scheduler already sets the
variable per task (gres with ``File=``), and the container keeps it (``apptainer
--cleanenv`` drops everything not passed on explicitly; ``--nv``/``--rocm`` alone would
expose every device).

The vendor (``gpu_vendor``, a cluster setting) is the one table below: the container
flag, the variables that name a node's devices, and how to list a machine's GPUs.  AMD
has two: ``ROCR_VISIBLE_DEVICES`` (what Slurm sets; the ROCm runtime then shows the
process only those devices, numbered from 0) and ``HIP_VISIBLE_DEVICES`` (what Ray
reads and sets per task; it refuses to start with ROCR's alone), counted within ROCR's.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from syndeo.core.errors import ConfigError, NodeError


@dataclass(frozen=True)
class Vendor:
    name: str
    apptainer_flag: str  # the driver libraries and device files in the container
    visible: str  # names the machine's devices a process may use (the scheduler sets it)
    ray_visible: str  # what Ray reads its GPU ids from (the same, or counted within it)
    passed: tuple[str, ...]  # what a container must be given through --cleanenv
    lister: tuple[str, ...]  # lists the machine's GPUs, one line each ...
    listed: str  # ... starting with this


VENDORS = {
    "nvidia": Vendor(
        "nvidia",
        "--nv",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
        # A site's (or user's) PCI_BUS_ID numbering: without it CUDA's order ("fastest
        # first") need not match the indices Slurm gave.
        ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
        ("nvidia-smi", "-L"),
        "GPU ",
    ),
    "amd": Vendor(
        "amd",
        "--rocm",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
        ("rocm-smi", "--showid", "--csv"),
        "card",
    ),
}
# NVIDIA's variable, for code that names it where no vendor is known (messages, docs).
VISIBLE = VENDORS["nvidia"].visible


def vendor(name: str | None) -> Vendor:
    """The vendor of ``gpu_vendor`` (None: NVIDIA)."""
    return VENDORS[name or "nvidia"]


def device_env(v: Vendor, devices: str) -> dict[str, str]:
    """The variables that give a node exactly ``devices`` (the machine's ids, "0,1")."""
    if v.visible == v.ray_visible:
        return {v.visible: devices}
    count = len([d for d in devices.split(",") if d.strip()])
    return {v.visible: devices, v.ray_visible: ",".join(str(i) for i in range(count))}


def host_devices(environ: Mapping[str, str], v: Vendor | None = None) -> list[str] | None:
    """The devices a launcher on this machine may hand out, or None if it cannot tell.

    The vendor's variable in the launcher's environment (the user's or a scheduler's
    choice) wins; otherwise its lister (``nvidia-smi -L``, ``rocm-smi``) lists the
    machine's GPUs.
    """
    v = v or vendor(None)
    if v.visible in environ:
        return [d.strip() for d in environ[v.visible].split(",") if d.strip()]
    smi = shutil.which(v.lister[0])
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, *v.lister[1:]], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    listed = [line for line in out.stdout.splitlines() if line.startswith(v.listed)]
    return [str(i) for i in range(len(listed))]


def split_devices(
    per_node: Sequence[int], available: list[str] | None, v: Vendor | None = None
) -> list[str]:
    """The devices of each node (the vendor's ``visible`` value): distinct devices, G of
    them for a G-GPU node.

    A node without GPUs gets an empty value (it sees none).  ConfigError, one line,
    when the machine has fewer devices than the nodes ask for.
    """
    v = v or vendor(None)
    want = sum(per_node)
    if available is None:
        raise ConfigError(
            f"the nodes ask for {want} GPU(s) but no GPU was found on this machine "
            f"(no {v.lister[0]}): set {v.visible} to the devices to use, e.g. {v.visible}=0,1"
        )
    if want > len(available):
        have = ",".join(available) or "none"
        raise ConfigError(
            f"the nodes ask for {want} GPU(s) but this machine offers {len(available)} "
            f"({v.visible}={have}): one GPU is never given to two nodes"
        )
    out, pos = [], 0
    for g in per_node:
        out.append(",".join(available[pos : pos + g]))
        pos += g
    return out


def node_devices(
    gpus: int, environ: Mapping[str, str], v: Vendor | None = None
) -> dict[str, str] | None:
    """The variables a G-GPU node must set itself, or None to leave them as they are.

    Launchers that share a machine (local) or a scheduler (Slurm gres) already set them.
    AMD: a scheduler sets ``ROCR_VISIBLE_DEVICES`` only, and Ray needs HIP's (its ids,
    counted within ROCR's).  A node alone on a machine that nobody narrowed (a cloud VM,
    an ssh host) would see every device while telling Ray G: it keeps the first G.
    Fewer than G is an error (a GPU task would wait forever); no lister leaves it to
    Ray, as before.
    """
    v = v or vendor(None)
    if gpus <= 0 or v.ray_visible in environ:
        return None
    if v.visible in environ:
        return {v.ray_visible: device_env(v, environ[v.visible])[v.ray_visible]}
    devices = host_devices(environ, v)
    if devices is None:
        return None
    if len(devices) < gpus:
        raise NodeError(
            f"this node asks for {gpus} GPU(s) but its machine shows {len(devices)} "
            f"({' '.join(v.lister)}): pick a machine/instance type with enough GPUs or lower "
            "gpus_per_node"
        )
    return device_env(v, ",".join(devices[:gpus])) if len(devices) > gpus else None
