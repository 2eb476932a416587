"""Real test beds on one machine: hosts as network namespaces on a private bridge.

Shared by the local Slurm cluster (:mod:`testbeds.slurmcluster`) and the bed of
SSH hosts (:mod:`testbeds.sshhosts`).  Root only; nothing here routes beyond
a bridge the bed itself created, so no test traffic leaves the machine.
"""
