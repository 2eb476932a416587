"""``python -m syndeo.image sif|lock``: the step the Packer build runs, and the lock."""

import sys

from syndeo.image.build import main

sys.exit(main())
