"""One GPU rule for every target: a node that asks for G GPUs sees exactly its G devices.

Ray takes the node's GPU ids from ``CUDA_VISIBLE_DEVICES`` when its raylet starts and
hands each ``num_gpus`` task its share of them, so a node started with exactly its
devices visible (and ``--num-gpus=G``) never sells a GPU twice.  Where nodes share a
machine (the local target) the launcher splits the machine's devices between them;
on Slurm the scheduler already sets ``CUDA_VISIBLE_DEVICES`` per task (gres with
``File=``), and the container keeps it (``apptainer --cleanenv`` drops everything
not passed on explicitly; ``--nv`` alone would expose every device).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence

from syndeo.core.errors import ConfigError, NodeError

VISIBLE = "CUDA_VISIBLE_DEVICES"


def host_devices(environ: Mapping[str, str]) -> list[str] | None:
    """The devices a launcher on this machine may hand out, or None if it cannot tell.

    ``CUDA_VISIBLE_DEVICES`` of the launcher (the user's or a scheduler's choice)
    wins; otherwise ``nvidia-smi -L`` lists the machine's GPUs.
    """
    if VISIBLE in environ:
        return [d.strip() for d in environ[VISIBLE].split(",") if d.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def split_devices(per_node: Sequence[int], available: list[str] | None) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` for each node: distinct devices, G of them for a G-GPU node.

    A node without GPUs gets an empty value (it sees none).  ConfigError, one line,
    when the machine has fewer devices than the nodes ask for.
    """
    want = sum(per_node)
    if available is None:
        raise ConfigError(
            f"the nodes ask for {want} GPU(s) but no GPU was found on this machine "
            f"(no nvidia-smi): set {VISIBLE} to the devices to use, e.g. {VISIBLE}=0,1"
        )
    if want > len(available):
        have = ",".join(available) or "none"
        raise ConfigError(
            f"the nodes ask for {want} GPU(s) but this machine offers {len(available)} "
            f"({VISIBLE}={have}): one GPU is never given to two nodes"
        )
    out, pos = [], 0
    for g in per_node:
        out.append(",".join(available[pos : pos + g]))
        pos += g
    return out


def node_devices(gpus: int, environ: Mapping[str, str]) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` a G-GPU node must set itself, or None to leave it as is.

    Launchers that share a machine (local) or a scheduler (Slurm gres) already set it.
    A node alone on a machine that nobody narrowed (a cloud VM, an ssh host) would see
    every device while telling Ray G: it keeps the first G.  Fewer than G is an error
    (a GPU task would wait forever); no nvidia-smi leaves it to Ray, as before.
    """
    if gpus <= 0 or VISIBLE in environ:
        return None
    devices = host_devices(environ)
    if devices is None:
        return None
    if len(devices) < gpus:
        raise NodeError(
            f"this node asks for {gpus} GPU(s) but its machine shows {len(devices)} "
            "(nvidia-smi -L): pick a machine/instance type with enough GPUs or lower "
            "gpus_per_node"
        )
    return ",".join(devices[:gpus]) if len(devices) > gpus else None
