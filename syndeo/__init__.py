"""Syndeo: one Ray workload, unchanged, on a laptop, a Slurm allocation or cloud VMs.

Every target ends in the same per-node command (``syndeo node``) configured only by
environment variables; see :mod:`syndeo.node.main`.  Importing this package imports no
cloud SDK and not Ray: those load lazily where they are used.
"""

__version__ = "0.1.0"
