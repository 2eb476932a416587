"""Real test beds on one machine: hosts as network namespaces on a private bridge.

Shared by the local Slurm cluster (:mod:`syndeo.slurm.localcluster`) and the bed of
SSH hosts (:mod:`syndeo.testbed.sshhosts`).  Root only; nothing here routes beyond
a bridge the bed itself created, so no test traffic leaves the machine.
"""
