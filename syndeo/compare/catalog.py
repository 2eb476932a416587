"""The price catalog: one CSV per cloud shipped in ``syndeo/data/prices``, plus the user's.

Rows are keyed by (provider, instance type, region).  A user catalog (``--catalog``)
replaces shipped rows with the same key and adds new ones.  A price that is not in
the catalog is an error naming the instance type and region -- never a silent zero.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from syndeo.compare.errors import CompareError
from syndeo.core.clouds import CLOUDS

# Bumped whenever the shipped CSVs change; printed in every report.
CATALOG_VERSION = "2026-11-22"
COLUMNS = (
    "instance_type",
    "vcpus",
    "memory_gib",
    "region",
    "ondemand_usd_per_h",
    "spot_usd_per_h",
    "relative_speed",
    "vcpus_per_core",
    "source",
    "as_of",
)


class Price(BaseModel):
    """One catalog row."""

    # inf/nan parse as floats from CSV text; either would print as a price.
    model_config = ConfigDict(
        extra="ignore", frozen=True, str_strip_whitespace=True, allow_inf_nan=False
    )

    provider: str
    instance_type: str = Field(min_length=1)
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(ge=0)
    region: str = Field(min_length=1)
    ondemand_usd_per_h: float = Field(gt=0)
    spot_usd_per_h: float | None = Field(default=None, gt=0)
    relative_speed: float = Field(
        default=1.0, gt=0, description="per-core speed relative to the machine measured"
    )
    vcpus_per_core: float = Field(default=2.0, ge=1, description="2 = a vCPU is a hyperthread")
    source: str = ""
    as_of: str = ""

    @field_validator("provider")
    @classmethod
    def _known_cloud(cls, v: str) -> str:
        # Prices are looked up by the target's lower-case name: "AWS" would be a row
        # nothing ever finds.
        if v.lower() not in CLOUDS:
            raise ValueError(f"{v!r} is not one of {', '.join(CLOUDS)}")
        return v.lower()

    @model_validator(mode="after")
    def _spot_not_above_on_demand(self) -> Price:
        if self.spot_usd_per_h is not None and self.spot_usd_per_h > self.ondemand_usd_per_h:
            raise ValueError(
                f"spot_usd_per_h {self.spot_usd_per_h:g} is above ondemand_usd_per_h "
                f"{self.ondemand_usd_per_h:g} (columns swapped?)"
            )
        return self

    @property
    def spot_is_artefact(self) -> bool:
        """A spot price its source calls an artefact (the shipped Azure rows): shown
        flagged, never named in a headline."""
        return self.spot_usd_per_h is not None and "artefact" in self.source.lower()


@dataclass
class Catalog:
    prices: dict[tuple[str, str, str], Price] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def price(self, provider: str, instance_type: str, region: str) -> Price:
        try:
            return self.prices[(provider, instance_type, region)]
        except KeyError:
            raise CompareError(
                f"no price for {instance_type} in {region} ({provider}) in the catalog "
                f"({', '.join(self.files)}): add a row to a CSV and pass --catalog FILE"
            ) from None

    def hourly(self, provider: str, instance_type: str, region: str, spot: bool) -> float:
        p = self.price(provider, instance_type, region)
        if not spot:
            return p.ondemand_usd_per_h
        if p.spot_usd_per_h is None:
            raise CompareError(
                f"no spot price for {instance_type} in {region} ({provider}) in the catalog: "
                "fill its spot_usd_per_h column and pass --catalog FILE"
            )
        return p.spot_usd_per_h

    def of(self, provider: str) -> list[Price]:
        return sorted(
            (p for p in self.prices.values() if p.provider == provider),
            key=lambda p: (p.region, p.vcpus, p.instance_type),
        )


def _read(text: str, name: str, provider: str | None) -> list[Price]:
    try:
        reader = csv.DictReader(text.splitlines())
        have = set(reader.fieldnames or ())
        missing = [
            c for c in ("instance_type", "vcpus", "region", "ondemand_usd_per_h") if c not in have
        ]
        if missing:
            raise CompareError(f"price catalog {name} lacks column(s) {', '.join(missing)}")
        if provider is None and "provider" not in have:
            raise CompareError(
                f"price catalog {name}: add a 'provider' column (aws, gcp, azure) or name the "
                "file after its cloud (aws.csv)"
            )
        return [_row(raw, name, line, provider) for line, raw in enumerate(reader, start=2)]
    except csv.Error as e:
        raise CompareError(f"price catalog {name} is not a CSV file ({e})") from None


def _row(raw: dict[str, str | None], name: str, line: int, provider: str | None) -> Price:
    data = {k: v for k, v in raw.items() if k is not None and v not in (None, "")}
    data.setdefault("memory_gib", "0")
    if provider is not None:
        data.setdefault("provider", provider)
    try:
        return Price.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        col = ".".join(str(x) for x in err["loc"]) or "row"
        raise CompareError(f"price catalog {name} line {line}: {col}: {err['msg']}") from None


def load_catalog(extra: Path | None = None) -> Catalog:
    """The shipped catalog, overridden/extended by ``extra`` if given."""
    cat = Catalog()
    base = resources.files("syndeo") / "data" / "prices"
    for cloud in CLOUDS:
        for p in _read((base / f"{cloud}.csv").read_text(), f"{cloud}.csv", cloud):
            cat.prices[(p.provider, p.instance_type, p.region)] = p
        cat.files.append(f"syndeo/data/prices/{cloud}.csv")
    if extra is not None:
        try:
            text = Path(extra).read_text(encoding="utf-8")
        except OSError as e:
            raise CompareError(f"cannot read price catalog {extra}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise CompareError(f"price catalog {extra} is not UTF-8 text ({e.reason})") from None
        stem = Path(extra).stem.lower()
        for p in _read(text, str(extra), stem if stem in CLOUDS else None):
            cat.prices[(p.provider, p.instance_type, p.region)] = p
        cat.files.append(str(extra))
    return cat
