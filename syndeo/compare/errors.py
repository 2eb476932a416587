"""The comparison's user-facing failure type (kept here so syndeo/errors.py stays the lead's)."""

from __future__ import annotations

from syndeo.errors import SyndeoError


class CompareError(SyndeoError):
    """A result, deploy summary, price catalog or plan request that cannot be priced."""
