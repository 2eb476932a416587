"""Test workload: what Ray got on each node (its memory and object store), as JSON in
``$SYNDEO_RESULT_PATH``."""

from __future__ import annotations

import json
import os

import ray

ray.init()
nodes = [n["Resources"] for n in ray.nodes() if n["Alive"]]
with open(os.environ["SYNDEO_RESULT_PATH"], "w") as f:
    json.dump({"nodes": nodes}, f)
