"""The benchmarks' shared harness (benchmarks/harness.py): timing, the figure-beside-baseline convention,
the markdown table, the final JSON line, the results folder and the plots. No benchmark runs here."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import harness
from benchmarks.harness import Run

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_markdown_table_takes_its_columns_from_the_first_row_and_formats_numbers() -> None:
    text = harness.markdown_table([{"path": "api", "events/s": 41234.5, "ratio": 0.12345, "n": 2000, "p99": None},
                                   {"path": "raw", "events/s": 250000.0, "ratio": 1.0, "n": 3, "p99": 1.5}],
                                  "Writes")
    assert text.splitlines() == [
        "**Writes**", "",
        "| path | events/s | ratio | n | p99 |", "|---|---|---|---|---|",
        "| api | 41,234 | 0.123 | 2,000 | - |", "| raw | 250,000 | 1 | 3 | 1.5 |"]
    with pytest.raises(ValueError):
        harness.markdown_table([])


def test_percentiles_are_measured_values_by_nearest_rank() -> None:
    samples = [0.001 * i for i in range(1, 101)]  # 1 ms .. 100 ms
    assert harness.percentile(samples, 50) == pytest.approx(0.050)
    assert harness.percentile(samples, 99) == pytest.approx(0.099)
    assert harness.percentile([0.2], 99) == 0.2
    assert harness.latency_ms(samples) == {"p50_ms": 50.0, "p99_ms": 99.0}
    with pytest.raises(ValueError):
        harness.percentile([], 50)


def test_timers_time_every_call_and_keep_the_best_or_the_median() -> None:
    calls: list[int] = []
    assert harness.best_of(lambda: calls.append(1), 3) >= 0 and len(calls) == 3
    assert harness.median_of(lambda: calls.append(1), 2) >= 0 and len(calls) == 5
    assert len(harness.each(calls.append, [7, 8])) == 2 and calls[-2:] == [7, 8]
    assert harness.peak_rss_mb() > 1


def test_a_figure_is_recorded_beside_its_baseline_with_their_ratio() -> None:
    run = Run("x", Path("unused"))
    assert run.beside("api events/s", 50.0, "raw events/s", 200.0, "events/s") == 0.25
    assert run.beside("valid %", 100.0, "raw valid %", 0.0, "%") is None  # no ratio to a zero baseline
    assert run.comparisons[0] == {"figure": "api events/s", "value": 50.0, "baseline": "raw events/s",
                                  "baseline value": 200.0, "unit": "events/s", "ratio": 0.25}


def test_a_run_prints_markdown_then_one_final_json_line_and_writes_its_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = Run("demo", tmp_path / "results" / "demo")
    run.table([{"size": 10, "seconds": 0.5}], "Sizes")
    run.beside("P-Mem ops/s", 100.0, "raw ops/s", 400.0, "ops/s")
    run.figures |= {"sizes": [10], "odd": float("nan")}
    summary = run.finish()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "**Sizes**" and "| size | seconds |" in out
    assert "**Figures beside their baselines (measured in the same run)**" in out
    last = json.loads(out[-1])  # the last line alone is the JSON, every figure in it
    assert last == summary and last["benchmark"] == "demo" and last["sizes"] == [10]
    assert last["odd"] is None  # NaN is not JSON: it is written as null
    assert last["beside_baselines"][0]["ratio"] == 0.25 and last["commit"] and "cores" in last["machine"]
    assert json.loads((tmp_path / "results" / "demo" / "results.json").read_text()) == last
    assert (tmp_path / "results" / "demo" / "table.md").read_text().startswith("**Sizes**")


def test_the_output_options_default_to_results_name(tmp_path: Path) -> None:
    p = argparse.ArgumentParser()
    harness.add_output_options(p, "store")
    a = p.parse_args([])
    assert a.results == a.plots == harness.ROOT / "results" / "store"
    assert p.parse_args(["--plots", str(tmp_path)]).plots == tmp_path


def test_the_plots_are_png_files_with_line_and_bar_panels(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")

    def draw(axes: list) -> None:
        harness.line_panel(axes[0], [1, 10, 100], {"P-Mem": [3.0, 2.0, 1.0], "baseline": [1.0, 1.0, 1.0]},
                           "events per cell", "events/s", "Scaling", logx=True)
        harness.bar_panel(axes[1], ["get", "search"], {"p50": [1.0, 2.0], "p99": [3.0, float("nan")]},
                          "ms", "Latency", logy=True)

    path = harness.save_figure(draw, tmp_path / "deep" / "figure.png", panels=2, suptitle="Both")
    assert path.read_bytes()[:8] == PNG


def test_the_three_benchmarks_draw_the_pngs_the_docs_embed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from benchmarks import server, store, validity

    store.plot_scaling({"history": [1, 10], "api": [30_000.0, 40_000.0], "raw": [200_000.0, 210_000.0]}, 5000,
                       tmp_path / "store_scaling.png")
    lat = {"http_p50_ms": 1.0, "http_p99_ms": 4.0, "cli_p50_ms": 180.0, "cli_p99_ms": 190.0}
    server.plot_latency({"cells": 100, "clients": 2, "healthz_floor": {"http_p50_ms": 0.5, "http_p99_ms": 2.0},
                         "get": lat, "search": lat, "ops": lat}, tmp_path / "server_latency.png")
    arm = {"single": {"gold": 100.0, "stale": 0.0}}
    validity.plot_by_length({"meta": {"budget": 1024}, "revision": {"L=1": {"commit": {"valid": 100.0}}},
                             "factconsolidation": {"6k": {"facts": 455, **{a: arm for a in validity.FC_ARMS}}}},
                            tmp_path / "validity_by_length.png")
    for name in ("store_scaling.png", "server_latency.png", "validity_by_length.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG, name
