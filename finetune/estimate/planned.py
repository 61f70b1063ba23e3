"""The typed pre-launch estimate a Plan carries (``Plan.estimate``) and stores with the run.

Its JSON keeps every key earlier versions wrote (a plan stored then reads back, and readers
of the stored JSON find what they read before); the band, the basis and the data-bound flag
are new. Built by estimate.estimator.estimate; read by attribute, never by key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class Estimate(BaseModel):
    """Time and euros for a planned cloud run, with every source named."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    instance_type: str | None = None
    instance_count: int = 1
    gpus: int | None = None
    hourly_usd: float | None = None  # per instance, the quote used (spot: its estimate)
    eur_per_hour: float | None = None  # all instances
    price_as_of: str | None = None
    price_age: str | None = None
    price_source: str | None = None
    price_is_estimate: bool = False
    charge: dict[str, Any] | None = None  # estimate.money.Charge.to_dict() of the planned charge
    spot_estimate: bool = False
    usd_per_eur: float | None = None
    rate_date: str | None = None
    rate_source: str | None = None
    seconds: float | None = None  # billable seconds per instance; None: throughput unknown
    eur: float | None = None
    images_per_sec: float | None = None  # all devices together
    throughput_source: str | None = None  # the basis's first line
    throughput_measured: bool = False  # from the ledger's runs, not the model
    # from the performance model (estimate.perf): the band and how the figure was reached
    images_per_sec_low: float | None = None
    images_per_sec_high: float | None = None
    seconds_low: float | None = None  # at the band's high throughput
    seconds_high: float | None = None
    eur_low: float | None = None
    eur_high: float | None = None
    precision: str | None = None
    efficiency: float | None = None  # scaling efficiency over the devices
    data_bound: bool = False  # the CPUs' decode rate, not the GPUs, sets the pace
    wider_band: bool = False  # no row of this kind in the GPU's generation, or of the family
    basis: tuple[str, ...] = ()
    interruption_seconds: float | None = None  # spot: expected lost work, in ``seconds``
    # the roofline behind a modelled throughput (`plan --explain`): what bounds the step,
    # the software stack, seconds per image per layer class, the stack's fitted efficiencies
    # and the rows they were fitted to
    bound: str | None = None
    stack: str | None = None
    terms: tuple[tuple[str, float], ...] = ()
    efficiencies: tuple[tuple[str, float], ...] = ()
    taught_by: tuple[str, ...] = ()
    summary: tuple[str, ...] = ()  # what `launch --dry-run --verbose` shows
    warnings: tuple[str, ...] = ()  # what to read first (a retired instance and its successor)

    @field_validator("summary", mode="before")
    @classmethod
    def _lines(cls, value: Any) -> Any:
        """Plans stored before kept a one-line summary as a string."""
        return (value,) if isinstance(value, str) else value

    @property
    def known(self) -> bool:
        """True when time and euros are estimated (a throughput and a price were found)."""
        return self.eur is not None

    @classmethod
    def unavailable(cls, why: str) -> Estimate:
        """An estimate that says why there is none (unknown price, region, ...)."""
        return cls(summary=(f"no estimate: {why}",))
