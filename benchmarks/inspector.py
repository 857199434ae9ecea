"""The memory inspector's speed in headless Chromium (docs/inspector.md, docs/benchmarks.md).

1. Page load and first render: p50 over 20 loads of ``/ui/`` (the frontier view) from the browser's
   navigation timing (navigation start to the page's first drawn view, the ``pmem:drawn:1`` mark), beside
   the baseline of the same browser loading the same 50 cells as one static HTML file (navigation start to
   the load event, no requests): the cost of a page that reads through the API. The load event alone (the
   page and its assets, before the API answers) is printed too.
2. Slider move to redrawn cell view: p50 over 20 moves of the time slider on a cell's page (input event to
   the view drawn again), beside the baseline of the three API reads that view makes, sent by httpx from
   Python one after another: the browser's share over the server's.
3. Graph view: p50 over 10 loads of ``/ui/graph/KEY`` (navigation start to the neighbourhood drawn), beside
   the baseline of reading the whole entity graph in-process (``Store.graph``, what each neighbourhood
   request read before it read only the rows at its entities).
4. With ``--next``: ``what_next`` beside the graph (``/v1/inspect/next``: the graph read under the
   server's store lock, ranked outside it, kept per event index), first and second call, and how long a
   small request (``/v1/inspect/summary``, sent every half second meanwhile) waited; beside the baseline of
   ``/v1/next`` (read and ranked under the lock) with the same probe.

The store is the synthetic FactConsolidation stream of ``benchmarks.validity`` written through the
template extractor: 18,000 facts (the 262k-token length); ``--quick``: 2,000 facts. The server is a real
``pmem serve --insecure-local`` (hashing embedder).

    .venv/bin/python -m benchmarks.inspector [--quick] [--facts N] [--next]
"""

from __future__ import annotations

import argparse
import html
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.browser import HEIGHT, WIDTH, chromium
from benchmarks.harness import Run, add_output_options
from benchmarks.serving import serving
from benchmarks.validity_fc import synthetic_fc
from benchmarks.validity_probes import ingest
from pmem.adapters.service.store import Store

LOADS = MOVES = 20
GRAPHS = 10
LOADED = "performance.getEntriesByType('navigation')[0].loadEventEnd"
DRAWN = "(n) => performance.getEntriesByName('pmem:drawn:' + n)[0].startTime"
MOVE = """async (n) => {
  const view = document.getElementById('view'), slider = document.getElementById('slider');
  const before = view.dataset.drawn, t0 = performance.now();
  slider.value = String(n);
  slider.dispatchEvent(new Event('input', {bubbles: true}));
  while (view.dataset.drawn === before || slider.dataset.busy) await new Promise(requestAnimationFrame);
  return performance.now() - t0;
}"""


def build(db: str, facts: int) -> tuple[str, int]:
    """The store, and a cell whose head changed (its key) with the store's last event index."""
    lines, _ = synthetic_fc(facts, 7)
    with Store(db, embedder="hashing", synchronous="OFF") as store:
        ingest(store, "default", lines)
        store.namespace = "default"
        changed = next(c.key for c in store.frontier() if len(store.history(c.key).versions) > 1)
        return changed, store.last_index()


def static_page(url: str, out: Path) -> Path:
    """The baseline: the same first 50 frontier cells as one static HTML table, read from a file."""
    cells = httpx.get(f"{url}/v1/frontier", params={"limit": 50}).json()["cells"]
    rows = "".join(f"<tr><td>{html.escape(c['key'])}</td><td>{html.escape(str(c['value']))}</td>"
                   f"<td>{c['status']}</td></tr>" for c in cells)
    out.write_text(f"<!doctype html><html><body><h1>Frontier</h1><table>{rows}</table></body></html>")
    return out


@contextmanager
def fresh_page(browser: Any, url: str, ready: str) -> Iterator[Any]:
    """A page in a new browser context (no cache, no storage), at ``url`` once ``ready`` is on it."""
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, bypass_csp=True)
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector(ready)
        yield page
    finally:
        ctx.close()


def page_loads(browser: Any, url: str, static: Path) -> tuple[list[float], list[float], list[float]]:
    ui, assets, baseline = [], [], []
    for _ in range(LOADS):
        with fresh_page(browser, f"{url}/ui/", "ul.cells") as page:
            ui.append(page.evaluate(DRAWN, 1))
            assets.append(page.evaluate(LOADED))
            page.goto(static.as_uri())
            baseline.append(page.evaluate(LOADED))
    return ui, assets, baseline


def slider_moves(browser: Any, url: str, key: str, last: int) -> list[float]:
    with fresh_page(browser, f"{url}/ui/cell/{key}", "#current-value") as page:
        return [page.evaluate(MOVE, last - 1 - (i * max(1, last // (MOVES + 1))) % last) for i in range(MOVES)]


def api_reads(url: str, key: str, last: int) -> list[float]:
    times = []
    with httpx.Client(base_url=url) as c:
        for i in range(MOVES):
            n = last - 1 - (i * max(1, last // (MOVES + 1))) % last
            t0 = time.perf_counter()
            for path, q in ((f"/v1/cells/{key}", {"disclose": "history,alternatives,support"}),
                            (f"/v1/cells/{key}/history", {}), (f"/v1/inspect/cells/{key}/events", {})):
                c.get(path, params={**q, "as_of": n}).raise_for_status()
            times.append((time.perf_counter() - t0) * 1000)
    return times


def graph_loads(browser: Any, url: str, key: str) -> list[float]:
    times = []
    for _ in range(GRAPHS):
        with fresh_page(browser, f"{url}/ui/graph/{key}", "#graph svg") as page:
            times.append(page.evaluate(DRAWN, 1))
    return times


def whole_graph_reads(db: str) -> list[float]:
    """The baseline of the graph view: the whole entity graph, read as the neighbourhood read it before."""
    times = []
    with Store(db, embedder="hashing") as store:
        for _ in range(3):
            t0 = time.perf_counter()
            store.graph(namespace="default")
            times.append((time.perf_counter() - t0) * 1000)
    return times


def ranking(url: str, path: str) -> tuple[float, list[float]]:
    """Seconds ``path`` took, and the milliseconds each ``/v1/inspect/summary`` sent meanwhile waited."""
    done: list[float] = []

    def call() -> None:
        t0 = time.perf_counter()
        httpx.get(f"{url}{path}", timeout=None).raise_for_status()
        done.append(time.perf_counter() - t0)

    worker = threading.Thread(target=call)
    worker.start()
    probes = []
    while worker.is_alive():
        time.sleep(0.5)
        t0 = time.perf_counter()
        httpx.get(f"{url}/v1/inspect/summary", timeout=None).raise_for_status()
        probes.append((time.perf_counter() - t0) * 1000)
    worker.join()
    return done[0], probes


def report_next(run: Run, url: str) -> None:
    med = statistics.median
    first, probes = ranking(url, "/v1/inspect/next?k=5")
    kept, _ = ranking(url, "/v1/inspect/next?k=5")
    base, base_probes = ranking(url, "/v1/next?k=5")
    run.table([{"request": "/v1/inspect/next (beside the graph)", "first s": first, "kept s": kept,
                "a request meanwhile waited, p50 ms": med(probes), "max ms": max(probes)},
               {"request": "/v1/next (baseline)", "first s": base, "kept s": None,
                "a request meanwhile waited, p50 ms": med(base_probes), "max ms": max(base_probes)}],
              "what_next beside the graph")
    run.beside("a request's wait during /v1/inspect/next, p50", med(probes), "the same during /v1/next",
               med(base_probes), "ms")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2,000 facts instead of 18,000 (under 2 minutes)")
    p.add_argument("--facts", type=int, default=None, help="facts in the synthetic stream")
    p.add_argument("--next", action="store_true", help="also what_next beside the graph (minutes on 18,000 facts)")
    add_output_options(p, "inspector")
    a = p.parse_args(argv)
    run = Run("inspector", a.results)
    facts = a.facts or (2_000 if a.quick else 18_000)
    with tempfile.TemporaryDirectory(prefix="pmem-bench-ui-") as tmp:
        db = str(Path(tmp) / "fc.db")
        t0 = time.perf_counter()
        key, last = build(db, facts)
        print(f"store: {facts} facts, {last} events, built in {time.perf_counter() - t0:.0f} s; cell {key}",
              file=sys.stderr)
        whole = whole_graph_reads(db)
        with serving(db, "--insecure-local") as url, chromium() as browser:
            static = static_page(url, Path(tmp) / "frontier.html")
            ui, assets, base = page_loads(browser, url, static)
            moves = slider_moves(browser, url, key, last)
            reads = api_reads(url, key, last)
            if a.next:  # before the graph view, which asks for it on a small store: the first call is cold
                report_next(run, url)
            graphs = graph_loads(browser, url, key)
    med = statistics.median
    figures = [("/ui/ page and assets loaded (load event)", assets, "the same 50 cells as one static HTML file", base),
               ("/ui/ page load + first render", ui, "the same 50 cells as one static HTML file", base),
               ("slider move -> redrawn cell view", moves, "the view's three API reads from httpx", reads),
               ("graph view: load + neighbourhood drawn", graphs, "the whole entity graph read in-process", whole)]
    run.table([{"measure": name, "p50 ms": med(ms), "samples": len(ms), "baseline": bname, "baseline p50 ms": med(b)}
               for name, ms, bname, b in figures],
              f"The inspector in headless Chromium, {facts:,} facts, {last:,} events")
    for name, ms, bname, b in figures:
        run.beside(f"{name}, p50", med(ms), f"{bname}, p50", med(b), "ms")
    run.figures |= {"facts": facts, "events": last, "cell": key}
    run.finish()

if __name__ == "__main__":
    main()
