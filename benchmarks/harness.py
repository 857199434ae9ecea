"""What every benchmark shares: timing, peak memory, the figure-beside-baseline convention, one markdown
results table, one final JSON line, the results folder and plots.

The machine a benchmark runs on is shared and noisy, so a figure alone says little: each benchmark measures
a baseline in the same run and prints the figure beside it (:meth:`Run.beside`). A run prints its tables as
markdown, ends with one line of JSON holding every figure, and writes the same figures to
``results/NAME/`` (ignored by git); its plots go to ``--plots DIR`` (default ``results/NAME/``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"  # the full data sets, beside the repository, never copied in
T = TypeVar("T")


def read_text(path: Path) -> str:
    """A data file's text; a missing file is a one-line error that names it."""
    try:
        return path.read_text()
    except FileNotFoundError:
        raise SystemExit(f"missing data file: {path} (benchmarks/README.md says what each benchmark reads)") from None


# -- timing ------------------------------------------------------------------------------------------
def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` calls, in seconds: the run least disturbed by the rest of the machine."""
    return min(timed(fn) for _ in range(max(1, repeat)))


def median_of(fn: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` calls, in seconds."""
    return statistics.median(timed(fn) for _ in range(max(1, repeat)))


def each(fn: Callable[[T], object], items: Iterable[T]) -> list[float]:
    """Seconds of ``fn(item)`` for each item, in order."""
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t0)
    return out


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by nearest rank: a value that was measured, never an interpolation."""
    if not samples:
        raise ValueError("no samples")
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def latency_ms(samples: Sequence[float], quantiles: Sequence[int] = (50, 99)) -> dict[str, float]:
    """``{"p50_ms": ..., "p99_ms": ...}`` of samples in seconds."""
    return {f"p{q}_ms": round(percentile(samples, q) * 1000, 3) for q in quantiles}


# -- memory ------------------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """This process's peak RSS in MiB. ``VmHWM`` where /proc has it: it starts afresh at ``exec``, where
    getrusage's ``ru_maxrss`` carries a parent's peak across fork and exec."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_peak_rss_mb() -> float:
    """The largest peak RSS of this process's finished children, in MiB."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# -- tables and figures ------------------------------------------------------------------------------
def cell(value: Any) -> str:
    """A table cell: thousands separators on large numbers, three significant digits on small ones."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def markdown_table(rows: Sequence[Mapping[str, Any]], title: str | None = None) -> str:
    """A markdown table; its columns are the first row's keys, in order."""
    if not rows:
        raise ValueError("a table needs at least one row")
    columns = list(rows[0])
    lines = [f"**{title}**", ""] if title else []
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def git_commit() -> str:
    """The checkout's short commit, or ``unknown`` outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, so that its JSON is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


class Run:
    """One benchmark run: the tables it prints, and every figure, for the final JSON line and
    ``results/NAME/`` (``results.json``, ``table.md``)."""

    def __init__(self, name: str, results: Path | None = None) -> None:
        self.name = name
        self.results = results if results is not None else ROOT / "results" / name
        self.figures: dict[str, Any] = {}
        self.tables: list[str] = []
        self.comparisons: list[dict[str, Any]] = []

    def table(self, rows: Sequence[Mapping[str, Any]], title: str | None = None) -> None:
        """Print ``rows`` as a markdown table now, and keep it for ``table.md``."""
        text = markdown_table(rows, title)
        self.tables.append(text)
        print(text, flush=True)

    def beside(self, figure: str, value: float, baseline: str, base: float, unit: str) -> float | None:
        """Record a figure beside the baseline measured in the same run; the ratio figure / baseline (None
        when the baseline is 0)."""
        ratio = value / base if base else None
        self.comparisons.append({"figure": figure, "value": value, "baseline": baseline, "baseline value": base,
                                 "unit": unit, "ratio": None if ratio is None else round(ratio, 3)})
        return ratio

    def finish(self) -> dict[str, Any]:
        """Print the figures beside their baselines and the final JSON line; write ``results/NAME/``."""
        if self.comparisons:
            self.table(self.comparisons, "Figures beside their baselines (measured in the same run)")
        summary: dict[str, Any] = finite({"benchmark": self.name, "commit": git_commit(),
                                          "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                                          **self.figures, "beside_baselines": self.comparisons})
        self.results.mkdir(parents=True, exist_ok=True)
        (self.results / "results.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        (self.results / "table.md").write_text("\n".join(self.tables))
        print(json.dumps(summary, separators=(",", ":"), default=str), flush=True)
        return summary


def add_output_options(parser: argparse.ArgumentParser, name: str) -> None:
    """``--results DIR`` and ``--plots DIR``, both ``results/NAME/`` by default."""
    default = ROOT / "results" / name
    parser.add_argument("--results", type=Path, default=default, help=f"where the figures go (default {default})")
    parser.add_argument("--plots", type=Path, default=default, help=f"where the PNG plots go (default {default})")


# -- plots -------------------------------------------------------------------------------------------
BENCH_EXTRA_HINT = "matplotlib is not installed: install the bench extra: pip install '.[bench]'"


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display); one line naming the extra without it."""
    try:
        import matplotlib
    except ModuleNotFoundError as e:
        if e.name != "matplotlib":
            raise  # matplotlib is there but broken: the real cause, not a misleading hint
        raise SystemExit(BENCH_EXTRA_HINT) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


STYLES = ("-o", "--s", ":^", "-.v", "-D", "--x", ":P")  # equal curves overlap: the style tells them apart


def line_panel(ax: Any, x: Sequence[float], series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str,
               title: str, logx: bool = False, logy: bool = False) -> None:
    """One panel: a line per series over ``x``, labelled axes, a legend."""
    for j, (label, ys) in enumerate(series.items()):
        ax.plot(x, ys, STYLES[j % len(STYLES)], label=label, markersize=max(4, 9 - j), alpha=0.85)
    if logx:  # ticks at the values measured, written out: a log axis's own ticks are powers of ten
        ax.set_xscale("log")
        ax.set_xticks(list(x), [cell(v) for v in x])
        ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    else:  # 140,000 reads faster than 140000
        ax.yaxis.set_major_formatter(pyplot().FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 1000 else f"{v:g}"))
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def bar_panel(ax: Any, groups: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str, title: str,
              logy: bool = False, legend: str = "best") -> None:
    """One panel: a group of bars per entry of ``groups``, a bar per series in each, labelled axes, a legend."""
    width = 0.8 / max(1, len(series))
    for j, (label, ys) in enumerate(series.items()):
        ax.bar([i + j * width for i in range(len(groups))], ys, width, label=label)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(groups))], groups, fontsize=8)
    if logy:  # from the decade below the shortest bar, so that every bar shows its height
        ax.set_yscale("log")
        low = min((v for ys in series.values() for v in ys if v > 0), default=1.0)
        ax.set_ylim(bottom=10 ** math.floor(math.log10(low)))
    ax.set(ylabel=ylabel, title=title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc=legend)


def save_figure(draw: Callable[[Any], None], path: Path, panels: int = 1, suptitle: str | None = None) -> Path:
    """A PNG of ``panels`` side-by-side panels drawn by ``draw(axes)`` (a list), written to ``path``."""
    plt = pyplot()
    fig, axes = plt.subplots(1, panels, figsize=(6 if panels == 1 else 5.2 * panels, 4.2), squeeze=False)
    draw(list(axes[0]))
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
