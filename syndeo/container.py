"""How a launcher turns "run ``syndeo node`` with these variables" into a process.

Bare: the current interpreter runs ``python -m syndeo node`` with the variables
added to the environment.  In an image: ``apptainer exec --containall --cleanenv``
with every variable passed explicitly and each bind mounted at the same path, so
paths (scratch, a file:// rendezvous) mean the same inside and outside.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def node_command(
    image: Path | None, env: Mapping[str, str], binds: Sequence[Path]
) -> tuple[list[str], dict[str, str]]:
    """argv and process environment that run ``syndeo node`` configured by ``env``."""
    if image is None:
        return [sys.executable, "-m", "syndeo", "node"], {**os.environ, **env}
    raise NotImplementedError("container launch is added by the image issue (#4)")
