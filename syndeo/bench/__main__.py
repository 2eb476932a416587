"""``python -m syndeo.bench``: the benchmark driver (what a cluster's head runs by default)."""

import sys

from syndeo.bench.cli import main

sys.exit(main())
