"""`finetune prices` and `finetune prices refresh` through the real CLI."""

import csv
import io
import json

from pricing_fakes import ec2_product
from typer.testing import CliRunner

from finetune.catalog import prices
from finetune.catalog._files import cache_dir
from finetune.cli import app

runner = CliRunner()


def invoke(*args, columns: int = 250):
    """`finetune prices ARGS` in a terminal ``columns`` wide (wide: one line per instance)."""
    return runner.invoke(app, ["prices", *args], env={"COLUMNS": str(columns)})


def test_table_lists_v100_instances_with_eur_prices_and_provenance():
    result = invoke("--gpu", "V100", "--region", "us-east-1", "--backend", "ec2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["instance", "GPUs", "GPU"]
    row = next(line for line in lines if line.startswith("p3.2xlarge "))
    # 3.06 USD / 1.1720 USD per EUR = 2.611 EUR; spot estimate 40 % of that = 1.044
    assert "2.611" in row and "~1.044" in row and "retired -> g5.2xlarge" in row
    assert "[1] AWS list price (issue baseline)" in result.output
    assert "~ spot estimate: on-demand minus 60%" in result.output
    assert "1 EUR = 1.1720 USD on 2025-06-30" in result.output
    assert "ml.p3" not in result.output


def test_in_an_80_column_terminal_the_table_fits_and_keeps_every_price_whole():
    result = invoke("--gpu", "V100", "--region", "us-east-1", "--backend", "ec2", columns=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = [line for line in lines if line.startswith("p3.2xlarge ")]
    assert any("2.611" in line for line in row) and any("~1.044" in line for line in row)
    assert "1 EUR = 1.1720 USD on 2025-06-30" in result.output


def test_json_and_csv_carry_sources_dates_and_the_estimate_flag():
    doc = json.loads(invoke("--gpu", "a10g", "--region", "us-east-1", "--format", "Json").output)
    first = doc["offers"][0]
    assert first["instance_type"] == "g5.xlarge" and first["gpu_model"] == "A10G"
    assert first["eur_per_hour"] == round(1.006 / 1.172, 4)
    assert first["price_as_of"] == "2025-05-31" and first["spot_is_estimate"] is True
    assert doc["rate"] == {
        "usd_per_eur": 1.172,
        "date": "2025-06-30",
        "source": doc["rate"]["source"],
    }
    out = invoke("--gpu", "T4", "--format", "csv").output
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["region"] for r in rows} == {"us-east-1", "eu-west-1", "eu-central-1"}
    assert all(r["price_source"] for r in rows)


def test_bad_input_gets_a_message_and_a_non_zero_exit():
    result = invoke("--gpu", "v10")
    assert result.exit_code == 2 and 'Did you mean "V100"?' in result.output
    result = invoke("--region", "eu-west-9")
    assert result.exit_code == 3 and "finetune prices refresh --region eu-west-9" in result.output
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
    assert "p5.48xlarge" in result.stdout and "June 2025" in result.stdout


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
