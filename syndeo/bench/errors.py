"""The benchmark's user-facing failure type (kept here so errors.py stays the lead's)."""

from __future__ import annotations

from syndeo.errors import SyndeoError


class BenchError(SyndeoError):
    """Invalid benchmark input (env id, mode, CPUs) or a benchmark run that failed."""
