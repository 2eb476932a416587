"""Run ``syndeo.launcher.deploy.deploy`` from a TOML config and print the outcome as JSON.

Tests run this as the unprivileged user (``runuser -u syndeo-ci``), the way an
HPC user runs syndeo on a login node.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from syndeo.core.errors import SyndeoError
from syndeo.launcher.config import load_config
from syndeo.launcher.deploy import deploy
from syndeo.launcher.ui import Ui


def main() -> int:
    try:
        outcome = deploy(load_config(Path(sys.argv[1])), Ui())
    except SyndeoError as exc:
        print(json.dumps({"error": str(exc), "exit_code": exc.exit_code}))
        return exc.exit_code
    print(json.dumps(dataclasses.asdict(outcome), default=str))
    return min(outcome.exit_code, 255)


if __name__ == "__main__":
    sys.exit(main())
