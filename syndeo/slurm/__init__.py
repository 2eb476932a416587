"""The Slurm target: sbatch rendering, submit/follow/collect/cancel, and a local test cluster."""
