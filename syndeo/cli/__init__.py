"""The front ends: ``syndeo`` (argparse) and the tasks ``tasks.py`` gives ``invoke``, over
one option table (``options.py``).  The top layer: it may import the whole package."""
