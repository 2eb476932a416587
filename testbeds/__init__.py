"""Real test beds on one machine, for a checkout (not in the wheel; the package never
imports them): hosts as network namespaces on a private bridge (:mod:`testbeds.netns`),
the local Slurm cluster (:mod:`testbeds.slurmcluster`), SSH hosts
(:mod:`testbeds.sshhosts`), the emulated AWS (:mod:`testbeds.awsemu`), the object-store
servers (:mod:`testbeds.objectstores`) and the unprivileged CI user
(:mod:`testbeds.users`).  Nothing here routes beyond a bridge the bed itself created, so
no test traffic leaves the machine.
"""
