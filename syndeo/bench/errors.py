"""The benchmark's user-facing failure type (one subclass of the package's error hierarchy)."""

from __future__ import annotations

from syndeo.core.errors import SyndeoError


class BenchError(SyndeoError):
    """Invalid benchmark input (env id, mode, CPUs) or a benchmark run that failed."""
