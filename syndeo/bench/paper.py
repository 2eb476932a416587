"""The paper's published throughput (Tables III-IV), shipped as data with syndeo."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

from syndeo.bench.envs import env_name


@dataclass(frozen=True)
class PaperRow:
    env_name: str
    cpus: int
    mean: float
    std: float
    per_cpu: float


def load() -> list[PaperRow]:
    text = resources.files("syndeo").joinpath("data/paper_throughput.csv").read_text()
    return [
        PaperRow(
            env_name=env_name(r["current_env_id"]),
            cpus=int(r["worker_cpus"]),
            mean=float(r["throughput_mean_steps_per_s"]),
            std=float(r["throughput_std"]),
            per_cpu=float(r["per_cpu_steps_per_s"]),
        )
        for r in csv.DictReader(text.splitlines())
    ]


def best_per_cpu() -> dict[str, float]:
    """The paper's highest per-CPU figure per env (its 28-CPU row): the strictest bar."""
    best: dict[str, float] = {}
    for row in load():
        best[row.env_name] = max(best.get(row.env_name, 0.0), row.per_cpu)
    return best
