"""`finetune prices refresh`: current prices from the AWS Pricing API and rates from the ECB.

Results go to the user cache (<cache dir>/prices/), which overrides the bundled snapshot.
Each file is replaced atomically (temp file + os.replace), and only after its source answered:
offline, the cache stays as it was and the report says how old it is.

The Pricing API lives in us-east-1 whatever region is priced. Its PriceList is a list of JSON
*strings*, one product each; the hourly price sits at
terms.OnDemand.<term>.priceDimensions.<dim>.pricePerUnit.USD. Spot prices are not in it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from finetune import settings
from finetune.adaptors import botocore
from finetune.aws.errors import translate
from finetune.aws.session import connect
from finetune.catalog import fx, instances, prices
from finetune.catalog.cache import cache_age, stamp, write_prices, write_rates
from finetune.catalog.usercache import cache_dir
from finetune.errors import CloudError, DataError, UsageError

ECB_URL = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-hist-90d.xml"
DEFAULT_REGIONS = ("us-east-1", "eu-west-1", "eu-central-1")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")


def _match(field_name: str, value: str) -> dict:
    return {"Type": "TERM_MATCH", "Field": field_name, "Value": value}


def ec2_filters(region: str) -> list[dict]:
    """On-demand Linux, shared tenancy, no pre-installed software, used capacity, GPU types."""
    return [
        _match("regionCode", region),
        _match("instanceFamily", "GPU instance"),
        _match("operatingSystem", "Linux"),
        _match("tenancy", "Shared"),
        _match("preInstalledSw", "NA"),
        _match("capacitystatus", "Used"),
        _match("licenseModel", "No License required"),
    ]


def sagemaker_filters(region: str) -> list[dict]:
    """All ML instance products of the region; training ones are picked while parsing."""
    return [_match("regionCode", region), _match("productFamily", "ML Instance")]


def get_products(client, service_code: str, filters: list[dict]):
    """Every product (parsed JSON) of a GetProducts query, following NextToken."""
    kwargs = dict(ServiceCode=service_code, Filters=filters, FormatVersion="aws_v1", MaxResults=100)
    while True:
        page = client.get_products(**kwargs)
        for item in page.get("PriceList", []):
            yield json.loads(item) if isinstance(item, str) else item
        if not page.get("NextToken"):
            return
        kwargs["NextToken"] = page["NextToken"]


def on_demand_usd(doc: dict) -> float | None:
    """The first positive hourly USD price among the product's on-demand terms."""
    for term in doc.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = float(dim.get("pricePerUnit", {}).get("USD", "0") or 0)
            if usd > 0:
                return usd
    return None


def parse_ec2(doc: dict) -> tuple[str, float] | None:
    """(instance type, USD/hour) for an EC2 product, None if it has no on-demand price."""
    itype = doc.get("product", {}).get("attributes", {}).get("instanceType")
    usd = on_demand_usd(doc)
    return (itype, usd) if itype and usd else None


def parse_sagemaker(doc: dict) -> tuple[str, float] | None:
    """(EC2 type name, USD/hour) for a SageMaker *training* instance product, else None."""
    attrs = doc.get("product", {}).get("attributes", {})
    raw = attrs.get("instanceName") or attrs.get("instanceType", "")  # "ml.p3.2xlarge-Training"
    usage = attrs.get("usagetype", "")
    training = attrs.get("component") == "Training" or raw.endswith("-Training") or "Train" in usage
    usd = on_demand_usd(doc)
    if not training or "Spot" in usage or not raw.startswith("ml.") or not usd:
        return None
    return instances.canonical_name(raw.split("-", 1)[0]), usd


_SERVICES = {
    "ec2": ("AmazonEC2", ec2_filters, parse_ec2),
    "sagemaker": ("AmazonSageMaker", sagemaker_filters, parse_sagemaker),
}


def fetch_prices(client, regions, backends, today) -> list[prices.Price]:
    """Prices for catalog instance types from the Pricing API (the cheapest if listed twice)."""
    known = instances.all_instances()
    found: dict[tuple[str, str, str], prices.Price] = {}
    for backend in backends:
        code, filters, parse = _SERVICES[backend]
        for region in regions:
            for doc in get_products(client, code, filters(region)):
                parsed = parse(doc)
                if parsed is None or parsed[0] not in known:
                    continue
                p = prices.Price(parsed[0], region, backend, parsed[1], today, _source(doc))
                if p.key not in found or p.usd_per_hour < found[p.key].usd_per_hour:
                    found[p.key] = p
    return list(found.values())


def _source(doc: dict) -> str:
    on_demand = (doc.get("terms") or {}).get("OnDemand") or {}
    first: dict[str, Any] = next(iter(on_demand.values()), {})
    effective = first.get("effectiveDate", "")
    return "AWS Pricing API (GetProducts)" + (f", effective {effective[:10]}" if effective else "")


def ecb_url(url: str | None = None) -> str:
    """The ECB feed address: ``url``, else FINETUNE_ECB_URL, else the ECB's 90-day feed."""
    return url or os.environ.get("FINETUNE_ECB_URL") or ECB_URL


def fetch_ecb(url: str | None = None, timeout: float = 15.0):
    """USD rates by date from the ECB reference-rate feed."""
    address = ecb_url(url)
    if not address.startswith(("https://", "http://")):  # no file:// or custom schemes
        raise UsageError(f"{address!r} is not an http(s) URL", "give the ECB feed's https URL.")
    # bandit B310 (url schemes): only http(s), checked above
    with urllib.request.urlopen(address, timeout=timeout) as resp:  # nosec B310
        return fx.parse_ecb_xml(resp.read())


def pricing_client():
    """A Pricing API client in us-east-1 (AWS_ENDPOINT_URL_PRICING redirects it)."""
    return connect(region="us-east-1").client("pricing")


@dataclass
class RefreshResult:
    """What a refresh wrote, what failed, and how old the cache is now."""

    prices_written: int = 0
    rates_written: int = 0
    latest_rate: fx.Rate | None = None
    problems: list[str] = field(default_factory=list)
    directory: Path | None = None
    age: str = ""

    def summary(self) -> str:
        """What was cached, what was not, and where the cache is, one line each."""
        lines = []
        if self.prices_written:
            lines.append(f"Cached {self.prices_written} prices from the AWS Pricing API.")
        if self.latest_rate is not None:
            lines.append(
                f"Cached {self.rates_written} ECB rates; latest: {self.latest_rate.describe()}."
            )
        lines += [f"Not refreshed: {p}" for p in self.problems]
        lines.append(f"Cache: {self.directory} ({self.age}).")
        return "\n".join(lines)


def check_regions(regions) -> list[str]:
    """The region names, or a UsageError for anything that is not shaped like one."""
    bad = [r for r in regions if not _REGION.match(r)]
    if bad:
        raise UsageError(
            f"Not an AWS region name: {', '.join(bad)}.", "use names like eu-west-1 or us-east-1."
        )
    return list(regions)


def refresh(
    regions=None,
    backends=prices.BACKENDS,
    *,
    offline_ok: bool = False,
    ecb_feed: str | None = None,
    client=None,
    now: datetime | None = None,
    directory: Path | None = None,
) -> RefreshResult:
    """Fetch prices and EUR rates into the cache; raise CloudError on failure unless offline_ok.

    Whatever a source returned is written even when the other failed; a failed source leaves
    its cache file untouched.
    """
    regions = check_regions(
        regions or ([settings.get().region] if settings.get().region else DEFAULT_REGIONS)
    )
    for b in backends:
        prices.check_backend(b)
    directory = directory or cache_dir()
    now = now or datetime.now(UTC)
    result = RefreshResult(directory=directory)
    _refresh_prices(result, directory, client, regions, backends, now)
    _refresh_rates(result, directory, ecb_feed, now)
    result.age = cache_age(directory, now)
    if result.problems and not offline_ok:
        raise CloudError(
            "Refresh incomplete: " + " ".join(result.problems) + f" Kept the cache ({result.age}).",
            "check the network and AWS credentials (the Pricing API needs pricing:GetProducts), "
            "or pass --offline-ok to keep the cache without failing.",
        )
    return result


def _refresh_prices(result: RefreshResult, directory: Path, client, regions, backends, now) -> None:
    client = client or pricing_client()  # DependencyError when boto3 is missing
    try:
        fetched = fetch_prices(client, regions, backends, now.date())
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        why = str(translate(exc, "GetProducts", region="us-east-1")).replace("\n", " ")
        result.problems.append(f"AWS Pricing API: {why}")
        return
    except (ValueError, KeyError, TypeError) as exc:
        result.problems.append(f"AWS Pricing API answered something unexpected ({exc!r}).")
        return
    for backend in sorted(set(backends) - {p.backend for p in fetched}):
        where = ", ".join(regions)
        result.problems.append(f"AWS Pricing API returned no {backend} GPU prices for {where}.")
    if not fetched:
        return
    write_prices(directory, fetched)
    stamp(directory, "prices", now)
    result.prices_written = len(fetched)


def _refresh_rates(result: RefreshResult, directory: Path, url, now) -> None:
    try:
        rates = fetch_ecb(url)
    # URLError, timeouts and refused connections are OSError; a bad URL is a ValueError.
    except (OSError, ValueError, http.client.HTTPException, DataError) as exc:
        reason = getattr(exc, "reason", None) or exc  # URLError wraps the socket error
        result.problems.append(f"ECB reference rates from {ecb_url(url)}: {reason}.")
        return
    write_rates(directory, rates)
    stamp(directory, "rates", now)
    day = max(rates)
    result.rates_written = len(rates)
    result.latest_rate = fx.Rate(rates[day], day, fx.ECB_SOURCE)
