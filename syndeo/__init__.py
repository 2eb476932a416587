"""Syndeo: one Ray workload, unchanged, on a laptop, a Slurm allocation or cloud VMs.

Every target ends in the same per-node command (``syndeo node``) configured only by
environment variables; see :mod:`syndeo.node.main`.  Importing this package imports no
cloud SDK and not Ray: those load lazily where they are used.
"""

from importlib import metadata as _metadata

# The version is written once, in pyproject.toml; an installed syndeo (a wheel, an editable
# install, the image's) carries it in its metadata.
try:
    __version__ = _metadata.version("syndeo")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
