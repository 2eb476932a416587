"""The Slurm target: typed settings, the sbatch script, and submit/follow/collect/cancel."""
