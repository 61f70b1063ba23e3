"""Bundled prices (the catalog snapshot), the user cache on top, the SageMaker estimate, and
clear errors for prices the catalog lacks."""

from datetime import date

import pytest

from finetune.catalog import prices
from finetune.catalog.usercache import cache_dir
from finetune.errors import DataError, UsageError

# Oracles read by hand from finetune/catalog/skypilot_aws_vms.csv (= skypilot-org/
# skypilot-catalog catalogs/v8/aws/vms.csv @ e385a0d348ed, filtered): on-demand USD/hour.
SNAPSHOT = {
    ("p3.2xlarge", "us-east-1"): 3.06,
    ("g4dn.xlarge", "us-east-1"): 0.526,
    ("g5.xlarge", "us-east-1"): 1.006,
    ("g5.12xlarge", "us-east-1"): 5.672,
    ("p4d.24xlarge", "us-east-1"): 21.957642,  # after the mid-2025 P4/P5 price cut
    ("p5.48xlarge", "us-east-1"): 55.04,
    ("g5.xlarge", "eu-west-1"): 1.123,
}


def test_ec2_prices_come_from_the_catalog_snapshot_with_its_source_and_commit():
    book = prices.load()
    assert book.warnings == []
    for (itype, region), usd in SNAPSHOT.items():
        p = book.get(itype, region)
        assert p.usd_per_hour == usd, (itype, region)
        assert p.as_of is None and p.age == "catalog snapshot (2025 or later)"
        assert "skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv @ e385a0d348ed" in p.source
    assert {p.backend for p in book.prices.values()} == {"ec2"}  # no ml.* without a refresh
    assert not any("unverified" in p.source for p in book.prices.values())


def test_the_bundled_snapshot_is_the_verified_file_named_in_its_sidecar():
    import hashlib
    import json

    from finetune.catalog._files import bundled_text

    meta = json.loads(bundled_text("skypilot_aws_vms.source.json"))
    data = bundled_text("skypilot_aws_vms.csv").encode()
    assert hashlib.sha256(data).hexdigest() == meta["sha256"]
    assert meta["commit"] == "e385a0d348eda9cefd9806423e7725944dc249e4"
    assert data.count(b"\n") == 465  # header + 464 rows


def test_retired_p2_has_no_sourced_price_and_says_so():
    with pytest.raises(DataError) as err:
        prices.price("p2.8xlarge", "us-east-1")
    assert "No sourced price for p2.8xlarge" in str(err.value)
    assert "retired" in str(err.value) and "g4dn.metal" in str(err.value)


def test_sagemaker_is_an_ec2_x_markup_estimate_until_a_refresh(monkeypatch):
    with pytest.raises(DataError, match="no sourced price: run `finetune prices refresh`"):
        prices.load().get("ml.g5.xlarge", "us-east-1", "sagemaker")
    p = prices.price("ml.g5.xlarge", "us-east-1", "sagemaker")
    assert p.estimate and p.display_name == "ml.g5.xlarge"
    assert p.usd_per_hour == pytest.approx(1.006 * 1.25)  # default markup 25 %
    assert "estimate: EC2 on-demand x 1.25" in p.source and "default 0.25" in p.source
    monkeypatch.setenv("FINETUNE_SAGEMAKER_MARKUP", "0.1")
    from finetune import settings

    settings.get.cache_clear()
    assert prices.price("g5.xlarge", "us-east-1", "sagemaker").usd_per_hour == pytest.approx(
        1.006 * 1.1
    )


def test_region_without_a_price_names_the_regions_that_have_one_and_the_fix():
    with pytest.raises(DataError) as err:
        prices.price("p3dn.24xlarge", "eu-central-1")
    message = str(err.value)
    assert "No ec2 price for p3dn.24xlarge in eu-central-1" in message
    assert "Known regions for it: eu-west-1, us-east-1, us-west-2" in message
    assert "finetune prices refresh --region eu-central-1" in message


def test_unknown_instance_and_backend_are_usage_errors():
    with pytest.raises(UsageError, match=r'Did you mean "g5\.xlarge"'):
        prices.price("g5.xlarg", "us-east-1")
    with pytest.raises(UsageError, match='Did you mean "sagemaker"'):
        prices.price("g5.xlarge", "us-east-1", "sagemake")


def test_unknown_region_in_a_listing_suggests_a_known_one():
    with pytest.raises(DataError, match='Did you mean "eu-west-1"'):
        prices.load().select(region="eu-west-3")


def test_cached_prices_override_bundled_ones():
    cached = prices.Price(
        "g5.xlarge", "us-east-1", "ec2", 0.99, date(2026, 1, 5), "AWS Pricing API"
    )
    new_region = prices.Price("g5.xlarge", "eu-north-1", "ec2", 1.1, date(2026, 1, 5), "AWS")
    path = cache_dir() / prices.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(prices.to_csv([cached, new_region]))
    book = prices.load()
    assert book.get("g5.xlarge", "us-east-1") == cached
    assert book.get("g5.xlarge", "eu-north-1") == new_region
    assert book.get("g4dn.xlarge", "us-east-1").usd_per_hour == 0.526  # bundled still there


@pytest.mark.parametrize(
    "text",
    [
        "not,a,price,file\n1,2,3,4\n",
        "InstanceType,Region,Backend,PriceUSD,AsOf,Source\ng5.xlarge,us-east-1,ec2,cheap,2026,x\n",
        "InstanceType,Region,Backend,PriceUSD,AsOf,Source\ng5.xlarge,us-east-1,ec3,1.0,2026-01-01,x\n",
    ],
)
def test_a_corrupt_cache_falls_back_to_the_bundled_data_with_a_warning(text):
    path = cache_dir() / prices.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(text)
    book = prices.load()
    assert len(book.warnings) == 1 and "Ignoring the price cache" in book.warnings[0]
    assert str(path) in book.warnings[0]
    assert book.get("g5.xlarge", "us-east-1").usd_per_hour == 1.006


def test_select_filters_by_gpu_region_and_backend():
    rows = prices.load().select(gpu="V100", region="us-east-1", backend="ec2")
    assert [p.display_name for p in rows] == [
        "p3.2xlarge",
        "p3.8xlarge",
        "p3.16xlarge",
        "p3dn.24xlarge",
    ]
    assert prices.load().select(gpu="V100", backend="sagemaker") == []
