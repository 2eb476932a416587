"""Cost/throughput comparison: measured throughput priced per target, and plans for N steps.

``syndeo.compare.settings`` is imported by the config and stays light; everything
else (report, plots, plan) is imported by the command that needs it.
"""
