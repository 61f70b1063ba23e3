"""Money, computed once: what AWS bills for the usage a backend reports, in euros. Backends
report charges (``Charge``: instances, seconds, market, hourly USD and its source, never
euros); ``euros`` applies each charge's billing rule (``ec2``: per second, 60 s minimum, the
interrupted-spot rules; ``sagemaker``: BillableTimeInSeconds x instances; ``free``) at one
dated ECB rate. `runs show`, `cost-report`, estimates and the --max-eur guards all call it
(docs/cost.md: what is billed and how)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from finetune.catalog.fx import Rate
from finetune.errors import DataError

EC2, SAGEMAKER, FREE = "ec2", "sagemaker", "free"
RULES = (EC2, SAGEMAKER, FREE)
EC2_MINIMUM_SECONDS = 60
FIRST_HOUR = 3600
# Seconds by which two clocks (ours, read just after a submit returns; AWS's for a job that
# ended at once) may disagree: an end up to this much before its start is skew, billed as 0 s
# with a note; further is a row whose times make no sense (NTP keeps clocks well within it).
MAX_CLOCK_SKEW = 10.0
SPOT_BILLING_URL = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/billing-for-interrupted-spot-instances.html"


@dataclass(frozen=True)
class Charge:
    """One billed item as a backend reports it: usage, the price paid and its provenance.

    ``seconds`` is per instance: for ``ec2`` the running time of each instance of the attempt
    (launch to end), for ``sagemaker`` the job's BillableTimeInSeconds. ``usd_per_hour`` is the
    price per instance recorded when the charge began (None: no price was known).
    """

    rule: str
    instance_type: str
    instances: int
    seconds: float
    usd_per_hour: float | None
    price_source: str = ""
    price_as_of: str | None = None  # ISO date of the price
    market: str = "on-demand"  # on-demand | spot
    interrupted_by_ec2: bool = False  # EC2 took a spot instance back (not the user, not us)
    started_at: float | None = None  # epoch seconds
    ended_at: float | None = None
    training_seconds: float | None = None  # SageMaker TrainingTimeInSeconds (managed spot)
    label: str = ""  # e.g. "attempt 2 (i-0abc, i-0def)"
    note: str = ""  # e.g. "clock skew of 4.2 s clamped" (shown with the line's billing rule)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Charge:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class Line:
    """One charge as billed: seconds per instance after the rule, dollars, euros, and why."""

    charge: Charge
    billed_seconds: float
    usd: float | None  # None when the charge has no price
    eur: float | None
    why: str


@dataclass(frozen=True)
class Money:
    """Euros with their provenance: every billed line, and the ECB rate used."""

    lines: tuple[Line, ...]
    rate: Rate
    estimate: bool = False  # a pre-launch estimate, not usage that happened

    @property
    def eur(self) -> float | None:
        """The total; None when a line has no price (the amount is then unknown)."""
        eurs = [line.eur for line in self.lines]
        return None if None in eurs else sum(e for e in eurs if e is not None)

    @property
    def usd(self) -> float | None:
        usds = [line.usd for line in self.lines]
        return None if None in usds else sum(u for u in usds if u is not None)

    @property
    def billed_seconds(self) -> float:
        """Billed seconds per instance, summed over the lines (attempts)."""
        return sum(line.billed_seconds for line in self.lines)

    @property
    def instance_seconds(self) -> float:
        """Billed seconds of all instances together."""
        return sum(line.billed_seconds * line.charge.instances for line in self.lines)

    def prices(self) -> list[str]:
        """Each distinct price with its source and date, e.g. for a provenance line."""
        out = [_price_text(line.charge) for line in self.lines if line.charge.rule != FREE]
        return list(dict.fromkeys(out))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view: total, lines, and the rate's value, date and source."""
        return {
            "eur": self.eur,
            "usd": self.usd,
            "estimate": self.estimate,
            "billed_seconds": self.billed_seconds,
            "instance_seconds": self.instance_seconds,
            "lines": [
                {
                    **line.charge.to_dict(),
                    "billed_seconds": line.billed_seconds,
                    "usd": line.usd,
                    "eur": line.eur,
                    "billing": line.why,
                }
                for line in self.lines
            ],
            "usd_per_eur": self.rate.usd_per_eur,
            "rate_date": self.rate.on.isoformat(),
            "rate_source": self.rate.source,
        }


def ec2_billed_seconds(seconds: float, interrupted_by_ec2: bool = False) -> tuple[float, str]:
    """(seconds billed per instance, why) for an EC2 Linux instance that ran ``seconds``.

    Per-second billing with a 60-second minimum. For a spot instance that EC2 interrupted,
    AWS's "Billing for interrupted Spot Instances" (SPOT_BILLING_URL) says, for Linux
    (excluding RHEL and SUSE): interrupted by Amazon EC2 in the first hour -- no charge;
    in any hour after the first -- charged for the seconds used. If *you* stop or terminate
    the spot instance (which includes our own --max-runtime switch), you are charged for the
    seconds used, as on-demand.
    """
    if seconds <= 0:
        return 0, "never ran: no charge"
    if interrupted_by_ec2 and seconds < FIRST_HOUR:
        return 0, "interrupted by EC2 in its first hour: no charge (AWS spot billing)"
    billed = max(EC2_MINIMUM_SECONDS, math.ceil(seconds))
    if interrupted_by_ec2:
        return billed, "interrupted by EC2 after its first hour: per second"
    return billed, "per second, 60 s minimum"


def elapsed(start: float, end: float, what: str = "the run") -> tuple[float, str]:
    """(seconds from ``start`` to ``end``, note). The two times often come from two clocks
    (ours at submit, AWS's at the end; moto's are milliseconds apart): an end up to
    MAX_CLOCK_SKEW before the start is skew, clamped to 0 s with a note that says so. An end
    further before its start is a DataError (the row cannot be costed)."""
    seconds = float(end) - float(start)
    if seconds >= 0:
        return seconds, ""
    if -seconds <= MAX_CLOCK_SKEW:
        return 0.0, f"clock skew of {-seconds:.3g} s clamped: its end time is before its start"
    raise DataError(
        f"{what} ends {-seconds:.0f} s before it starts: more than the {MAX_CLOCK_SKEW:.0f} s "
        "two clocks may disagree by, so its time and euros cannot be computed",
        "check the run's times (`finetune runs show RUN --json`); the other runs are unaffected.",
    )


def billed_seconds(charge: Charge) -> tuple[float, str]:
    """(seconds billed per instance, why) under the charge's rule; the charge's note (clock
    skew clamped) is part of the why."""
    billed, why = _rule_seconds(charge)
    return billed, f"{why}; {charge.note}" if charge.note else why


def _rule_seconds(charge: Charge) -> tuple[float, str]:
    if charge.rule == EC2:
        return ec2_billed_seconds(charge.seconds, charge.interrupted_by_ec2)
    if charge.rule == SAGEMAKER:
        spot = " (managed spot: already discounted)" if charge.market == "spot" else ""
        return max(charge.seconds, 0), f"SageMaker billable seconds{spot}"
    if charge.rule == FREE:
        return 0, "this machine: no charge"
    raise DataError(
        f"unknown billing rule {charge.rule!r} in a run record (known: {', '.join(RULES)})",
        "upgrade finetune; the ledger was written by a newer version.",
    )


def euros(charges: Iterable[Charge], rate: Rate, estimate: bool = False) -> Money:
    """THE money function: each charge billed by its rule, times its instances and hourly USD
    price, converted at ``rate`` (USD per 1 EUR, ECB). No charges: 0 EUR."""
    if rate.usd_per_eur <= 0:
        raise DataError(
            f"The exchange rate must be positive (got {rate.usd_per_eur} USD per EUR).",
            "run `finetune prices refresh` to fetch the ECB reference rate.",
        )
    lines = []
    for c in charges:
        if c.seconds < 0 or c.instances < 0 or (c.usd_per_hour or 0) < 0:
            raise DataError(
                "Billed seconds, instance count and hourly price cannot be negative "
                f"(got {c.seconds}, {c.instances}, {c.usd_per_hour}).",
                "check this run's record (`finetune runs show RUN --json`); the other runs "
                "are unaffected.",
            )
        billed, why = billed_seconds(c)
        price = 0.0 if c.rule == FREE else c.usd_per_hour
        usd = None if price is None else billed * c.instances * price / 3600.0
        lines.append(Line(c, billed, usd, None if usd is None else usd / rate.usd_per_eur, why))
    return Money(tuple(lines), rate, estimate)


def _price_text(c: Charge) -> str:
    if c.usd_per_hour is None:
        return f"{c.instance_type} {c.market}: no price known ({c.price_source or 'none'})"
    when = f", as of {c.price_as_of}" if c.price_as_of else ""
    return f"{c.instance_type} {c.market} USD {c.usd_per_hour:g}/h ({c.price_source}{when})"


def eur_per_hour(charge: Charge, rate: Rate) -> float | None:
    """Euros per hour of ``charge``'s instances running (all of them): the figure budget guards
    divide a --max-eur by. None when the charge has no price."""
    hour = replace(charge, seconds=FIRST_HOUR, interrupted_by_ec2=False)
    return euros([hour], rate).eur


def affordable_seconds(max_eur: float, charge: Charge, rate: Rate) -> int | None:
    """The longest run of ``charge``'s instances that ``max_eur`` pays for (None: no price)."""
    per_hour = eur_per_hour(charge, rate)
    if not per_hour:
        return None
    return int(max(max_eur, 0.0) / per_hour * 3600)


def smallest_cap(charge: Charge, rate: Rate, seconds: float) -> float | None:
    """The smallest --max-eur, in whole cents (rounded up), that pays for ``seconds`` of
    ``charge``'s instances under its billing rule (None: no price). What a refusal of a cap
    too small to run at all offers instead."""
    eur = euros([replace(charge, seconds=seconds, interrupted_by_ec2=False)], rate).eur
    return None if eur is None else math.ceil(eur * 100 - 1e-9) / 100
