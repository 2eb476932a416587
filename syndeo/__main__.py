import sys

from syndeo.cli import main

sys.exit(main())
