"""Bundled prices, the user cache on top, and clear errors for prices the catalog lacks."""

from datetime import date

import pytest

from finetune.catalog import prices
from finetune.catalog._files import cache_dir
from finetune.errors import DataError, UsageError

# The issue's list prices (USD/hour): they must be in the data exactly, marked as such.
ISSUE_BASELINE = {
    ("p2.xlarge", "us-east-1", "ec2"): 0.90,
    ("p2.8xlarge", "us-east-1", "ec2"): 7.20,
    ("p2.16xlarge", "us-east-1", "ec2"): 14.40,
    ("p3.2xlarge", "us-east-1", "ec2"): 3.06,
    ("p3.8xlarge", "us-east-1", "ec2"): 12.24,
    ("p3.16xlarge", "us-east-1", "ec2"): 24.48,
    ("p3dn.24xlarge", "us-east-1", "ec2"): 31.212,
    ("g4dn.xlarge", "us-east-1", "ec2"): 0.526,
    ("g5.xlarge", "us-east-1", "ec2"): 1.006,
    ("p3.2xlarge", "eu-west-1", "ec2"): 3.305,
    ("p3.8xlarge", "eu-west-1", "ec2"): 13.22,
    ("p3.16xlarge", "eu-west-1", "ec2"): 26.44,
    ("p3.2xlarge", "us-east-1", "sagemaker"): 3.825,
    ("p3.8xlarge", "us-east-1", "sagemaker"): 14.688,
    ("p3.16xlarge", "us-east-1", "sagemaker"): 28.152,
}


def test_issue_baseline_prices_are_bundled_with_their_source():
    book = prices.load()
    for key, usd in ISSUE_BASELINE.items():
        p = book.prices[key]
        assert p.usd_per_hour == usd, key
        assert p.source == "AWS list price (issue baseline)"
        assert p.as_of == date(2025, 5, 31)


def test_every_bundled_price_is_dated_and_p4_p5_say_they_are_stale():
    book = prices.load()
    assert book.warnings == []
    for p in book.prices.values():
        assert p.as_of and p.source, p.key
        if p.instance_type.startswith(("p4d", "p5")):
            assert "June 2025" in p.source and "refresh" in p.source


def test_lookup_accepts_sagemaker_names():
    p = prices.price("ml.p3.2xlarge", "us-east-1", "sagemaker")
    assert (p.usd_per_hour, p.display_name) == (3.825, "ml.p3.2xlarge")


def test_region_without_a_price_names_the_regions_that_have_one_and_the_fix():
    with pytest.raises(DataError) as err:
        prices.price("p3dn.24xlarge", "eu-west-1")
    message = str(err.value)
    assert "No ec2 price for p3dn.24xlarge in eu-west-1" in message
    assert "Known regions for it: us-east-1" in message
    assert "finetune prices refresh --region eu-west-1" in message


def test_unknown_instance_and_backend_are_usage_errors():
    with pytest.raises(UsageError, match=r'Did you mean "g5\.xlarge"'):
        prices.price("g5.xlarg", "us-east-1")
    with pytest.raises(UsageError, match='Did you mean "sagemaker"'):
        prices.price("g5.xlarge", "us-east-1", "sagemake")


def test_unknown_region_in_a_listing_suggests_a_known_one():
    with pytest.raises(DataError, match='Did you mean "eu-west-1"'):
        prices.load().select(region="eu-west-2")


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
    rows = prices.load().select(gpu="V100", region="us-east-1", backend="sagemaker")
    assert [p.display_name for p in rows] == [
        "ml.p3.2xlarge",
        "ml.p3.8xlarge",
        "ml.p3.16xlarge",
        "ml.p3dn.24xlarge",
    ]
