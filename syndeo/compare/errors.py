"""The comparison's user-facing failure type (one subclass of the package's error hierarchy)."""

from __future__ import annotations

from syndeo.core.errors import SyndeoError


class CompareError(SyndeoError):
    """A result, deploy summary, price catalog or plan request that cannot be priced."""
