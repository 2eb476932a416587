"""What the clouds' pre-flight checks share (``check``, and deploy/up before anything exists).

Each check of a cloud passes with a phrase for ``check``'s summary line, or refuses in one
line naming the fix (ConfigError).  A check that cannot be made -- the API not reachable,
no permission to ask -- says so in the summary and lets the deploy go on: the apply
would meet the same answer with its own error, and a missing right to *ask* must not stop
a deployer who holds every right to *do*.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syndeo.launcher.targets.terraform import terraform_root


def type_counts(target: Any) -> dict[str, int]:
    """Instances of each VM type a cloud target's cluster starts with (its groups' own
    types, else the top-level one)."""
    s, layout = target.settings, target.cfg.layout
    if layout is None:
        return {s.instance_type or "": target.cfg.nodes}
    types = target._group_types(layout)
    counts: dict[str, int] = {}
    for g in layout.groups:
        itype = types.get(g.name) or s.instance_type or ""
        counts[itype] = counts.get(itype, 0) + g.nodes
    return counts


def deployer_file(cloud: str, name: str) -> tuple[Path, str]:
    """The deployer's least-privilege file of ``terraform/<cloud>`` (read at run time, so
    the permissions checked are the ones the file grants), and how to name it to a user."""
    return terraform_root() / cloud / name, f"terraform/{cloud}/{name}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
