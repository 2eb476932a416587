"""Submit a syndeo Slurm job from a TOML config without following it; print ids as JSON.

For tests that act on the job while it runs (requeue): the test reads the
rendezvous and Slurm state itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from syndeo.launcher.config import load_config
from syndeo.launcher.spec import ClusterSpec
from syndeo.launcher.targets.base import new_cluster_id
from syndeo.launcher.targets.slurm.target import SlurmTarget
from syndeo.rendezvous import open_rendezvous


def main() -> int:
    cfg = load_config(Path(sys.argv[1]))
    target = SlurmTarget(cfg)
    cluster_id = new_cluster_id("slurm")
    uri = target.default_rendezvous()
    open_rendezvous(uri, cluster_id).check()
    spec = ClusterSpec.from_config(cfg, uri, cluster_id)
    launched = target.launch(spec)
    # The launch key to the test (only): the job's result is sealed with it.
    out = {"cluster_id": cluster_id, "rendezvous": uri, "launch_key": spec.launch_key}
    print(json.dumps({**out, **launched.part.model_dump(mode="json")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
