import sys

from syndeo.bench.cli import main

sys.exit(main())
