"""The project's own measurements (bring-up, rendezvous latency and load, the container
and Slurm-group benchmarks): run from a checkout, results as JSON; not in the wheel."""
