"""`prices refresh` against recorded-shape Pricing API answers and an ECB feed served locally;
offline, the cache is kept as it was and its age reported."""

from datetime import UTC, date, datetime

import pytest
from pricing_fakes import ec2_product, sagemaker_product

from finetune.catalog import fx, prices, refresh
from finetune.catalog.usercache import cache_dir
from finetune.errors import CloudError, UsageError

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _serve_ec2_and_sagemaker(fake):
    not_in_catalog = ec2_product("m5.large", "us-east-1", "0.096")
    fake.pages["AmazonEC2"] = [
        [ec2_product("g5.xlarge", "us-east-1", "1.0060000000"), not_in_catalog],
        [ec2_product("p5.48xlarge", "us-east-1", "55.0400000000")],  # page 2, after the NextToken
        [ec2_product("g6.xlarge", "us-east-1", "0.0000000000")],  # no on-demand price: skipped
    ]
    fake.pages["AmazonSageMaker"] = [
        [
            sagemaker_product("ml.g5.xlarge", "Training", "1.4080000000"),
            sagemaker_product("ml.g5.xlarge", "Hosting", "1.4100000000"),  # not training
            sagemaker_product("ml.p4d.24xlarge", "Training", "25.2500000000"),
        ]
    ]


def test_refresh_pages_through_the_pricing_api_and_caches_prices_and_rates(online):
    _serve_ec2_and_sagemaker(online)
    result = refresh.refresh(["us-east-1"], now=NOW)

    book = prices.load()
    p5 = book.get("p5.48xlarge", "us-east-1")
    assert (p5.usd_per_hour, p5.as_of) == (55.04, date(2026, 3, 2))
    assert p5.source == "AWS Pricing API (GetProducts), effective 2025-06-01"
    assert book.get("g5.xlarge", "us-east-1").usd_per_hour == 1.006
    assert book.get("g5.xlarge", "us-east-1", "sagemaker").usd_per_hour == 1.408
    assert book.get("p4d.24xlarge", "us-east-1", "sagemaker").usd_per_hour == 25.25
    assert book.get("g6.xlarge", "us-east-1").source != p5.source  # zero price left alone
    assert result.prices_written == 4 and result.problems == []

    ec2_calls = [r for r in online.requests if r["ServiceCode"] == "AmazonEC2"]
    assert [r.get("NextToken") for r in ec2_calls] == [None, "page-1-token", "page-2-token"]
    assert ec2_calls[0]["target"] == "AWSPriceListService.GetProducts"
    sent = {f["Field"]: f["Value"] for f in ec2_calls[0]["Filters"]}
    assert sent == {
        "regionCode": "us-east-1",
        "instanceFamily": "GPU instance",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
    }
    assert all(f["Type"] == "TERM_MATCH" for f in ec2_calls[0]["Filters"])

    # Cached ECB days join the bundled ones; Easter Monday takes the Thursday before.
    assert fx.eur_rate(date(2025, 4, 21)) == fx.Rate(1.14, date(2025, 4, 17), fx.ECB_SOURCE)
    assert result.latest_rate.usd_per_eur == 1.15 and result.rates_written == 6
    assert "prices less than a minute old" in result.summary()


def test_offline_refresh_keeps_the_cache_and_says_how_old_it_is(online, aws_env, closed_url):
    _serve_ec2_and_sagemaker(online)
    refresh.refresh(["us-east-1"], now=NOW)
    files = {p.name: p.read_bytes() for p in cache_dir().iterdir()}

    aws_env.setenv("AWS_ENDPOINT_URL_PRICING", closed_url)
    aws_env.setenv("FINETUNE_ECB_URL", closed_url + "/ecb.xml")
    later = datetime(2026, 3, 5, 15, 0, tzinfo=UTC)
    with pytest.raises(CloudError) as err:
        refresh.refresh(["us-east-1"], now=later)
    message = str(err.value)
    assert "AWS Pricing API" in message and "ECB reference rates" in message
    assert "Kept the cache (prices 3 days old, rates 3 days old)" in message
    assert "--offline-ok" in message
    assert {p.name: p.read_bytes() for p in cache_dir().iterdir()} == files

    result = refresh.refresh(["us-east-1"], offline_ok=True, now=later)
    assert len(result.problems) == 2 and "3 days old" in result.summary()
    assert {p.name: p.read_bytes() for p in cache_dir().iterdir()} == files


def test_offline_without_a_cache_says_the_bundled_snapshot_is_used(offline):
    result = refresh.refresh(["eu-west-1"], offline_ok=True, now=NOW)
    assert result.age == "empty: the bundled snapshot is used"
    assert not cache_dir().exists() or not any(cache_dir().iterdir())


def test_missing_credentials_are_reported_and_the_ecb_part_still_succeeds(online, aws_env):
    aws_env.delenv("AWS_ACCESS_KEY_ID")
    aws_env.delenv("AWS_SECRET_ACCESS_KEY")
    result = refresh.refresh(["us-east-1"], offline_ok=True, now=NOW)
    assert result.prices_written == 0 and result.rates_written == 6
    assert any("credentials" in p for p in result.problems)


def test_a_corrupt_price_cache_is_replaced_by_a_refresh(online):
    _serve_ec2_and_sagemaker(online)
    path = cache_dir() / prices.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text("garbage\x00\n")
    refresh.refresh(["us-east-1"], backends=("ec2",), now=NOW)
    assert prices.load().warnings == []
    assert prices.load().get("p5.48xlarge", "us-east-1").usd_per_hour == 55.04


def test_empty_answers_are_a_problem_not_an_empty_cache(online):
    with pytest.raises(CloudError, match="returned no ec2 GPU prices for eu-west-1"):
        refresh.refresh(["eu-west-1"], backends=("ec2",), now=NOW)
    assert not (cache_dir() / prices.CACHE_FILE).exists()
    online.pages["AmazonEC2"] = [[ec2_product("g5.xlarge", "eu-west-1", "1.1")]]
    result = refresh.refresh(["eu-west-1"], offline_ok=True, now=NOW)  # SageMaker: nothing
    assert result.problems == ["AWS Pricing API returned no sagemaker GPU prices for eu-west-1."]
    assert prices.load().get("g5.xlarge", "eu-west-1").usd_per_hour == 1.1


def test_bad_region_names_are_refused_before_any_request(online):
    with pytest.raises(UsageError, match="Not an AWS region name: Ireland"):
        refresh.refresh(["Ireland"], now=NOW)
    assert online.requests == []


def test_parsers_ignore_products_they_cannot_price():
    assert refresh.parse_ec2({"product": {"attributes": {}}, "terms": {}}) is None
    spot = sagemaker_product("ml.g5.xlarge", "Training", "0.5")
    spot["product"]["attributes"]["usagetype"] = "USE1-Train-Spot:ml.g5.xlarge"
    assert refresh.parse_sagemaker(spot) is None
    assert refresh.parse_sagemaker(sagemaker_product("ml.g5.xlarge", "Notebook", "1")) is None
