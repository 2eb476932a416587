"""The Slurm target (implementation in :mod:`syndeo.slurm.target`)."""

from syndeo.slurm.target import SlurmTarget

__all__ = ["SlurmTarget"]
