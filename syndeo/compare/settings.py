"""``[cost.onprem]``: what one core-hour of your own machines costs (pydantic only, no I/O).

Imported by :mod:`syndeo.launcher.config`, so it must stay free of heavy imports.  The
defaults are illustrative figures for a dual-socket 64-core server, not a quote:
set your own in the config TOML.  The formula::

    node_hour = capex / (years x 8760 h x utilisation)    # hardware, spread over the hours used
              + power_w / 1000 x usd_per_kwh              # electricity while it works
    core_hour = node_hour x (1 + admin_share) / cores_per_node

A "core" here is what every compare figure calls a CPU: one CPU as Ray counts it (a
logical CPU, i.e. a hardware thread, on an SMT machine), so ``cores_per_node`` is the
CPUs a node offers to Ray and the rate is per Ray CPU-hour.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

HOURS_PER_YEAR = 8760.0


class OnPremCost(BaseModel):
    # TOML can spell inf and nan; either would print as a price.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    capex_usd_per_node: float = Field(default=12000.0, ge=0, description="purchase price of a node")
    cores_per_node: int = Field(default=64, ge=1, description="CPUs a node offers to Ray")
    amortisation_years: float = Field(default=5.0, gt=0)
    utilisation: float = Field(
        default=0.6, gt=0, le=1, description="share of its life a node does paid-for work"
    )
    power_w_per_node: float = Field(
        default=600.0, ge=0, description="wall-plug draw under load, cooling share included"
    )
    usd_per_kwh: float = Field(default=0.15, ge=0)
    admin_share: float = Field(
        default=0.3, ge=0, description="staff, space, network as a share of hardware + power"
    )

    @model_validator(mode="after")
    def _not_free(self) -> OnPremCost:
        # A zero rate would make every on-prem run "cheapest" at 0.00 $: never a silent zero.
        if self.core_hour_usd() <= 0:
            raise ValueError(
                "gives 0 $/CPU-hour: set capex_usd_per_node or power_w_per_node and usd_per_kwh"
            )
        return self

    def node_hour_usd(self) -> float:
        hardware = self.capex_usd_per_node / (
            self.amortisation_years * HOURS_PER_YEAR * self.utilisation
        )
        power = self.power_w_per_node / 1000.0 * self.usd_per_kwh
        return (hardware + power) * (1.0 + self.admin_share)

    def core_hour_usd(self) -> float:
        return self.node_hour_usd() / self.cores_per_node

    def formula(self) -> str:
        """The formula with this model's inputs, as the report prints it."""
        return (
            f"({self.capex_usd_per_node:g} $ / ({self.amortisation_years:g} y x 8760 h x "
            f"{self.utilisation:g}) + {self.power_w_per_node:g} W / 1000 x "
            f"{self.usd_per_kwh:g} $/kWh) x (1 + {self.admin_share:g}) / "
            f"{self.cores_per_node} CPUs = {self.core_hour_usd():.6f} $/CPU-hour"
        )


class CostSettings(BaseModel):
    """The config's ``[cost]`` section."""

    model_config = ConfigDict(extra="forbid")

    onprem: OnPremCost = OnPremCost()
