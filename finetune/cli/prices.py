"""`finetune prices`: GPU instances and their hourly price in euros; `prices refresh`."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from finetune import settings
from finetune.catalog import prices
from finetune.catalog.refresh import refresh as do_refresh
from finetune.catalog.spot import DEFAULT_SOURCE
from finetune.cli._options import Backend, Format, Help, Region, SpotOrOnDemand, typed_flags
from finetune.cli._render import check_format, info
from finetune.estimate.price_table import list_offers
from finetune.report.text import header_of, rows_to_csv, table_text, wrap_text

app = typer.Typer(
    help="GPU instances with their hourly price in EUR, on-demand and spot, like "
    "`sky gpus list`. EC2 prices come from a bundled catalog snapshot (2025 or later) and EUR "
    "from the ECB's history, unless `finetune prices refresh` cached newer ones; SageMaker "
    "ml.* prices only from a refresh.",
    invoke_without_command=True,
)

FORMATS = ("table", "json", "csv")


@app.callback()
@typed_flags
def list_prices(
    ctx: typer.Context,
    gpu: str = typer.Option(None, help="Only instances with this GPU model, e.g. V100, A10G, L4."),
    region: Annotated[
        Region[str | None],
        Help("Only this region, e.g. eu-west-1. Default: FINETUNE_REGION, else all."),
    ] = None,
    backend: Annotated[
        Backend[str | None], Help("Only this backend: ec2 or sagemaker (ml.* types).")
    ] = None,
    spot: Annotated[
        SpotOrOnDemand[bool],
        Help(
            "Ask EC2 for current spot prices (needs AWS credentials). Without it, spot prices "
            "are the catalog snapshot's regional median (else a default discount), marked '~'."
        ),
    ] = False,
    fmt: Annotated[Format, Help("table, json or csv.")] = "table",
) -> None:
    """List GPU instances with on-demand and spot prices in EUR per hour."""
    if ctx.invoked_subcommand is not None:
        return
    fmt = _check_format(fmt)
    listing = list_offers(gpu, region or settings.get().region, backend, live_spot=spot)
    for warning in listing.warnings:
        info(f"Warning: {warning}")
    typer.echo(_render(listing, fmt))


@app.command("refresh")
@typed_flags
def refresh(
    region: Annotated[
        Region[list[str]],
        Help(
            "Region to price (repeatable). Default: FINETUNE_REGION, else "
            "us-east-1, eu-west-1 and eu-central-1."
        ),
    ] = [],  # noqa: B006  # only read, never changed
    backend: Annotated[
        Backend[list[str]], Help("ec2 and/or sagemaker (repeatable). Default: both.")
    ] = [],  # noqa: B006
    offline_ok: bool = typer.Option(
        False,
        "--offline-ok",
        help="Exit 0 when AWS or the ECB cannot be reached (the cache is kept).",
    ),
) -> None:
    """Fetch current prices (AWS Pricing API) and EUR rates (ECB) into the user cache."""
    result = do_refresh(region or None, tuple(backend) or prices.BACKENDS, offline_ok=offline_ok)
    typer.echo(result.summary())


def _check_format(fmt: str) -> str:
    return check_format(fmt, FORMATS)


def _render(listing, fmt: str) -> str:
    dicts = [o.as_dict() for o in listing.offers]
    missing = [u.as_dict() for u in listing.unpriced]
    if fmt == "json":
        rate = {"usd_per_eur": listing.rate.usd_per_eur, "date": listing.rate.on.isoformat()}
        doc = {"offers": dicts, "unpriced": missing, "rate": rate | {"source": listing.rate.source}}
        return json.dumps(
            doc | {"cache": listing.cache_age, "spot_fallback": DEFAULT_SOURCE}, indent=2
        )
    if fmt == "csv":
        names = list(dict.fromkeys(k for d in dicts + missing for k in d))
        rows = [[d.get(n) for n in names] for d in dicts + missing]
        return rows_to_csv(names, [["" if v is None else v for v in r] for r in rows]).rstrip("\n")
    return _table(listing, DEFAULT_SOURCE)


# the table's columns: the JSON/CSV keys (estimate.price_table's as_dict), shown as
# report.text.header_of names them
COLUMNS = [
    "instance_type",
    "gpu_count",
    "gpu_model",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "region",
    "backend",
    "eur_per_hour",
    "spot_eur_per_hour",
    "price_source",  # the footnote's number: its text and age once, below the table
    "note",
]


def _table(listing, spot_note: str) -> str:
    sources = listing.sources()
    headers = [header_of(c) for c in COLUMNS]
    rows = []
    for o in listing.offers:
        i, p = o.instance, o.price
        spot = f"{'~' if o.spot.estimate else ''}{o.spot_eur_per_hour:.3f}"
        age = f"[{sources.index(p.source) + 1}]"
        rows.append(
            [p.display_name, str(i.gpu_count), i.gpu_model, f"{i.gpu_memory_gib:g}", str(i.vcpus),
             f"{i.memory_gib:g}", p.region, p.backend, f"{o.eur_per_hour:.3f}", spot, age,
             o.note()]
        )  # fmt: skip
    for u in listing.unpriced:
        i, d = u.instance, u.as_dict()
        rows.append(
            [d["instance_type"], str(i.gpu_count), i.gpu_model, f"{i.gpu_memory_gib:g}",
             str(i.vcpus), f"{i.memory_gib:g}", u.region, u.backend, "-", "-", "-", d["note"]]
        )  # fmt: skip
    if not rows:
        return "No instances match."
    ages = {o.price.source: o.price.age for o in listing.offers}
    lines = [
        f"[{n}] {s}" + (f" (age: {ages[s]})" if ages.get(s) and ages[s] not in s else "")
        for n, s in enumerate(sources, start=1)
    ]
    lines.append(
        f"~ spot: an estimate -- the catalog snapshot's median over the region's zones where it "
        f"has one, else {spot_note}."
    )
    lines.append(f"EUR: {listing.rate.describe()}. Price cache: {listing.cache_age}.")
    return table_text(headers, rows) + "\n\n" + "\n".join(wrap_text(line) for line in lines)
