"""How a setting says it is a command-line option too (read by syndeo/cli/options.py).

In ``core`` because the node settings every node of a cluster shares
(:class:`syndeo.core.nodeconfig.ClusterOptions`) are user settings as well: one
declaration gives the option, the TOML key, the node variable and the Terraform attribute.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue


def option(
    default: Any,
    help: str,
    *,
    name: str | None = None,
    flag: Literal["switch", "negatable"] | None = None,
    **bounds: Any,
) -> Any:
    """A setting that is a command-line option of deploy/up/check too, on ``syndeo`` and
    ``invoke`` alike (syndeo/cli/options.py makes the option from the field): its default
    and bounds as for any field, its help, its name where it differs from the field's
    (``--join-timeout``), and how a bool is given (``--tls``; ``--[no-]dashboard``)."""
    extra: dict[str, JsonValue] = {"option": name or "", "flag": flag or ""}
    return Field(default, description=help, json_schema_extra=extra, **bounds)
