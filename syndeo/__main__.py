"""``python -m syndeo``: the ``syndeo`` command."""

import sys

from syndeo.cli.main import main

sys.exit(main())
