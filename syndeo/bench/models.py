"""Typed configuration and result documents of the benchmark (one JSON per run)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from syndeo.bench.envs import EnvVersion
from syndeo.bench.nodewatch import NodeLoss

Mode = Literal["count", "collect"]
Protocol = Literal["paper", "steady"]
SCHEMA_VERSION = 1


class BenchConfig(BaseModel):
    """What to run.  Defaults reproduce the paper's protocol on every env."""

    model_config = ConfigDict(extra="forbid")

    envs: list[str] = Field(default_factory=lambda: ["all"])
    modes: list[Mode] = Field(default_factory=lambda: ["count"])  # type: ignore[arg-type]
    protocol: Protocol = "paper"
    samples_per_cpu: int = Field(
        default=1000, ge=1, description="samples = this x actors per repeat"
    )
    repeats: int = Field(default=4, ge=1)
    envs_per_actor: int = Field(default=16, ge=1, description="K vectorised envs in each actor")
    hidden: tuple[int, ...] = (64, 64)
    env_version: EnvVersion = "v5"
    steady_seconds: float = Field(
        default=5.0, gt=0, description="steady protocol: target seconds per repeat (sizes the run)"
    )
    workers: list[int] | None = Field(
        default=None, description="actor counts to sweep (default: one per cluster CPU)"
    )
    local_limit: bool = True
    rllib: bool = False
    seed: int = 0

    @field_validator("hidden")
    @classmethod
    def _positive_layers(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(h <= 0 for h in v):
            raise ValueError("hidden layers must be positive sizes, e.g. 64,64")
        return v


class Repeat(BaseModel):
    """One measured repeat: exact sample count over wall time seen by the driver."""

    samples: int
    seconds: float
    steps_per_s: float
    actor_cpu_seconds: float | None = Field(
        default=None, description="CPU time all actors used in the repeat (syndeo only)"
    )


class Series(BaseModel):
    """Repeats of one (env, mode, workers, method) combination with their summary."""

    method: Literal["syndeo", "local_limit", "rllib_ppo"]
    repeats: list[Repeat]
    mean: float
    std: float
    startup_s: float | None = Field(default=None, description="actor/process creation + env reset")
    note: str | None = None


class EnvResult(BaseModel):
    env_id: str
    env_name: str
    mode: Mode
    workers: int
    envs_per_actor: int
    samples_requested: int
    samples_counted: int
    syndeo: Series
    local_limit: Series | None = None
    rllib: Series | None = None
    ratio_local_limit: float | None = Field(
        default=None,
        description="median over repeats of syndeo / local limit, same mode, interleaved",
    )
    ratio_rllib: float | None = None
    peak_rss_per_actor_bytes: list[int] = Field(default_factory=list)
    steps_per_cpu_second: float | None = Field(
        default=None,
        description="median over repeats of samples / actor CPU seconds: per-core speed, "
        "independent of other load on the host",
    )
    actor_niceness: int | None = Field(
        default=None, description="scheduling niceness of actors (local limit uses the same)"
    )
    node_losses: list[NodeLoss] = Field(
        default_factory=list,
        description="nodes lost while this env ran (warm-up included), with the throughput dip",
    )


class Manifest(BaseModel):
    target: str
    cluster_nodes: int
    cluster_cpus: int
    cpu_model: str
    hostname: str
    versions: dict[str, str]
    image_digest: str | None
    git_commit: str | None
    started_at: str
    finished_at: str | None = None
    load_avg_1m: list[float] = Field(
        default_factory=list, description="driver host's 1-min load average at start and end"
    )


class BenchResult(BaseModel):
    schema_version: int = SCHEMA_VERSION
    manifest: Manifest
    config: BenchConfig
    results: list[EnvResult]
    notes: list[str] = Field(default_factory=list)
    partial: bool = Field(
        default=False,
        description="written after every repeat while running: true until the run ends "
        "(an interrupted run keeps what it measured; its last entry may have fewer repeats)",
    )
    repeats_from_checkpoint: int = Field(
        default=0,
        description="measured repeats carried over from the checkpoint of an earlier run "
        "(a job requeued at its time limit): this run measured the rest",
    )
