"""How a setting says it is a command-line option too (read by syndeo/cli/options.py).

In ``core`` because the node settings every node of a cluster shares
(:class:`syndeo.core.nodeconfig.ClusterOptions`) are user settings as well: one
declaration gives the option, the TOML key, the node variable and the Terraform attribute.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, JsonValue

_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``30s``, ``5m``, ``2h`` or ``1d`` (ValueError otherwise)."""
    m = _DURATION_RE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a duration: use e.g. 90, 30s, 5m, 2h or 1d")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def duration_field(value: Any) -> Any:
    """A field validator's ``mode="before"`` step: a duration text becomes seconds."""
    return parse_duration(value) if isinstance(value, str) else value


def option(
    default: Any,
    help: str,
    *,
    name: str | None = None,
    flag: Literal["switch", "negatable"] | None = None,
    duration: bool = False,
    **bounds: Any,
) -> Any:
    """A setting that is a command-line option of deploy/up/check too, on ``syndeo`` and
    ``invoke`` alike (syndeo/cli/options.py makes the option from the field): its default
    and bounds as for any field, its help, its name where it differs from the field's
    (``--join-timeout``), how a bool is given (``--tls``; ``--[no-]dashboard``), and whether
    a number of seconds is also given as a duration (``5m``; the field then takes the text
    through :func:`duration_field`)."""
    extra: dict[str, JsonValue] = {"option": name or "", "flag": flag or "", "duration": duration}
    return Field(default, description=help, json_schema_extra=extra, **bounds)
