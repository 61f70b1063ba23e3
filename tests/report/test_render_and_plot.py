"""The report over runs: table, JSON, CSV, Markdown, provenance, plots, and runs without metrics."""

import csv
import io
import json

import pytest
from runfacts import epochs, make_run

from finetune.errors import UsageError
from finetune.report import plot, render


def sweep():
    six = epochs([100] * 6, [0.5, 0.7, 0.8, 0.85, 0.866, 0.87], images_per_sec=300.0)
    return [
        make_run(run_id="g1", steady_images_per_sec=300.0, epochs=six),
        make_run(
            run_id="g8",
            instance_type="p3.16xlarge",
            devices_per_host=8,
            steady_images_per_sec=2160.0,
            billable_seconds=600,
            wall_seconds=590,
            hourly_usd=24.48,
            spot=True,
            epochs=epochs([15] * 6, [0.5, 0.7, 0.8, 0.85, 0.866, 0.87], images_per_sec=2160.0),
        ),
        make_run(run_id="broken", billable_seconds=120, wall_seconds=118),  # no metrics at all
    ]


def test_report_rows_totals_and_notes():
    report = render.build_report(sweep(), target_acc=0.865)
    g1, g8, broken = report.rows
    assert g8.speedup == pytest.approx(7.2) and g8.efficiency == pytest.approx(0.9)
    assert g1.eur == pytest.approx(2.55) and g1.eur_per_epoch == pytest.approx(0.425)
    assert g8.eur == pytest.approx(3.4) and g8.images_per_sec_per_device == pytest.approx(270.0)
    assert g1.time_to_target_seconds == 500 and g1.eur_to_target == pytest.approx(2.55 * 5 / 6)
    assert broken.images_per_sec is None and broken.speedup is None and broken.eur_per_epoch is None
    assert broken.eur == pytest.approx(120 * 3.06 / 3600 / 1.2)  # still costs money
    assert report.notes == ["broken: no throughput metrics, so no speedup or efficiency."]
    assert report.totals["runs"] == 3
    assert report.totals["eur"] == pytest.approx(2.55 + 3.4 + 0.085)
    assert report.provenance == (
        "Prices: p3.2xlarge on-demand USD 3.06/h (AWS list price (issue baseline), as of "
        "2025-05-31); p3.16xlarge on-demand USD 24.48/h (AWS list price (issue baseline), "
        "as of 2025-05-31). "
        "EUR: 1 EUR = 1.2000 USD on 2025-06-30 (ECB euro foreign exchange reference rate)."
    )


def test_table_and_markdown_are_human_readable():
    report = render.build_report(sweep(), target_acc=0.865)
    # wide enough for one line per run and per header (the headers are the JSON keys' words)
    table = render.render(report, "table", width=300)
    lines = table.splitlines()
    # every run completed: said once under the table, not in a column
    assert lines[0].split()[:6] == ["run", "ID", "devices", "spot", "wall", "seconds"]
    assert "All 3 run(s) completed." in table
    g8 = next(line for line in lines if line.startswith("g8 "))
    for cell in ("8 GPU p3.16xlarge", "yes", "9m 50s", "7.20x", "90.0 %",
                 "3.40", "1m 15s"):  # fmt: skip
        assert cell in g8
    # the steady-state speedup has the wall-clock one beside it, and says which is which
    assert "speedup: steady-state images/s" in " ".join(table.split())
    assert "Total: 3 run(s), 6.04 EUR" in table
    # the footer wraps at the table width: compare the words
    assert " ".join(table.split()).endswith(" ".join(report.provenance.split()))
    md = render.render(report, "markdown")
    assert (
        md.startswith("| run ID | devices | spot | wall seconds |")
        and "| --- |" in md
        and report.provenance in md
    )


@pytest.mark.parametrize("width", [80, 120])
def test_the_table_fits_the_terminal_and_never_breaks_a_cell(width, monkeypatch):
    report = render.build_report(sweep(), target_acc=0.865)
    headers, rows = render._human(report)
    monkeypatch.setenv("COLUMNS", str(width))  # what a terminal of that width says
    table = render.render(report, "TABLE")
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= width
    assert len(max(lines, key=len)) > width - 30  # it uses the room it has
    for row in rows:  # every cell whole on one line, beside its run id
        for cell in row[1:]:
            assert any(line.startswith(row[0] + " ") and cell in line for line in lines), cell
    wide = "".join(render.render(report, "table", width=300).split())
    for header in headers:  # headers may wrap at spaces, but each is there
        assert all(word in table for word in header.split()) and "".join(header.split()) in wide


def test_json_and_csv_keep_every_figure():
    report = render.build_report(sweep())
    doc = json.loads(render.render(report, "json"))
    assert doc["runs"][1]["efficiency"] == pytest.approx(0.9)
    assert doc["runs"][2]["images_per_sec"] is None
    assert doc["provenance"] == report.provenance
    rows = list(csv.DictReader(io.StringIO(render.render(report, "csv"))))
    assert rows[1]["baseline_runs"] == "g1" and rows[2]["speedup"] == ""
    with pytest.raises(UsageError, match='Did you mean "json"'):
        render.render(report, "jsno")


def test_a_report_of_runs_without_metrics_still_renders():
    report = render.build_report([make_run(run_id="a"), make_run(run_id="b")])
    text = render.render(report, "table")
    assert "a: no throughput metrics" in text and "Total: 2 run(s), 5.10 EUR" in text
    with pytest.raises(UsageError, match="No run has a speedup"):
        plot.plot_scaling(report, "x.png")


# matplotlib 3.8 calls pyparsing 3.3 APIs that warn as deprecated: not ours to fix.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:matplotlib.*")
def test_plots_write_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")  # in the [train] extra
    report = render.build_report(sweep())
    png = plot.plot_scaling(report, tmp_path / "scaling.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(UsageError, match="does not exist"):  # folders are never created
        plot.plot_cost_vs_time(report, tmp_path / "sub" / "cost.svg")
    assert not (tmp_path / "sub").exists()
    (tmp_path / "sub").mkdir()
    svg = plot.plot_cost_vs_time(report, tmp_path / "sub" / "cost.svg")
    assert b"<svg" in svg.read_bytes()[:500]
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["cost.svg"]  # no temp left
    with pytest.raises(UsageError, match="extension"):
        plot.plot_cost_vs_time(report, tmp_path / "cost.pdf")
