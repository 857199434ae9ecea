// The P-Mem memory inspector (docs/inspector.md). Plain JavaScript, no library, no network but this
// server: it reads the memory through the /v1 API with the tab's bearer token, and draws each view the
// URL names, as of the event index the clock shows. Text from the memory is only ever set as text
// (never as HTML), so a stored value cannot script the page.
"use strict";

const TOKEN_KEY = "pmem.inspector.token";
const SVG = "http://www.w3.org/2000/svg";
const state = {token: sessionStorage.getItem(TOKEN_KEY), last: 0, namespace: null, graph: null, drawn: 0, route: 0};

// -- small helpers ------------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  return fill(el, attrs, children);
}
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  return fill(el, attrs, children);
}
function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function params() { return new URLSearchParams(location.search); }
function asOf() {
  const v = params().get("as_of");
  return v === null || v === "" || isNaN(Number(v)) ? null : Number(v);
}
function withAsOf(path, extra) {
  const p = new URLSearchParams(extra || {});
  const n = asOf();
  if (n !== null) p.set("as_of", n);
  if (state.namespace && params().get("namespace")) p.set("namespace", state.namespace);
  const q = p.toString();
  return q ? `${path}?${q}` : path;
}
function cellUrl(key) { return withAsOf(`/ui/cell/${encodeURIComponent(key)}`); }
function graphUrl(key) { return withAsOf(`/ui/graph/${encodeURIComponent(key)}`); }
function link(href, text, attrs) { return h("a", {href, "data-nav": true, ...(attrs || {})}, text); }
function badge(status) { return h("span", {class: `badge ${status}`}, status); }
function clip(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }

// An answer that arrives after the person has moved to another page: it must not draw over that page.
class Stale extends Error {}

class ApiError extends Error {
  constructor(status, body) {
    super(`${body.error || "error"}: ${body.detail || ""}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, query) {
  const route = state.route;
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== null && v !== undefined && v !== "" && v !== false) url.searchParams.set(k, v);
  }
  const ns = params().get("namespace");
  if (ns) url.searchParams.set("namespace", ns);
  const headers = state.token ? {Authorization: `Bearer ${state.token}`} : {};
  let r;
  // A busy server answers 503 with Retry-After and no effect: a read is safe to ask again, a few times.
  for (let attempt = 0; ; attempt++) {
    try {
      r = await fetch(url, {headers});
    } catch (e) {
      throw new ApiError(0, {error: "server unreachable", detail: `${e.message} (is pmem serve still running?)`});
    }
    if (r.status !== 503 || attempt >= 3) break;
    const wait = Math.min(Number(r.headers.get("Retry-After")) || 1, 5);
    await new Promise((done) => setTimeout(done, wait * 1000));
  }
  let body;
  try { body = await r.json(); } catch { body = {error: "unreadable answer", detail: r.statusText}; }
  if (route !== state.route) throw new Stale("the page changed while this was asked");
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

// -- start, tokens and errors -------------------------------------------------------------------------
async function start() {
  try {
    const summary = await api("/v1/inspect/summary");
    state.last = summary.last_index;
    state.namespace = summary.namespace;
  } catch (e) {
    return e.status === 401 ? askToken(e) : failed(e);
  }
  document.getElementById("who").textContent = `namespace ${state.namespace} · ${state.last} events`;
  document.getElementById("forget").hidden = !state.token;
  notice(null);
  await route();
}

function askToken(e) {
  const refused = state.token
    ? `The server refused this token (${e.status} ${e.body.error}: ${e.body.detail}). Enter another one.`
    : "This server needs a token: paste one from `pmem keys add` (a read-only key is enough).";
  notice(refused, "error");
  const input = h("input", {id: "token", type: "password", autocomplete: "off", required: true,
                            placeholder: "pmem_…", "aria-describedby": "token-help"});
  const form = h("form", {id: "token-form", class: "card"},
    h("h1", {}, "Open the memory"),
    h("label", {for: "token"}, "Bearer token"), input,
    h("p", {id: "token-help", class: "muted"},
      "Kept in this tab only (sessionStorage) and sent only to this server."),
    h("button", {type: "submit"}, "Open"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = input.value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    start();
  });
  show(form);
  input.focus();
}

function failed(e) {
  if (e instanceof Stale) return;  // the page it was for is gone: the page now shown stays
  const what = e instanceof ApiError ? `${e.status || ""} ${e.body.error}: ${e.body.detail}` : String(e);
  notice(`Could not read the memory: ${what}`, "error");
  show(h("p", {class: "muted"}, "Nothing to show."));
}

function notice(text, kind) {
  const el = document.getElementById("notice");
  el.hidden = !text;
  el.className = kind || "";
  el.textContent = text || "";
}

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes);
  state.drawn += 1;
  view.dataset.drawn = String(state.drawn);
  performance.mark(`pmem:drawn:${state.drawn}`);  // what python -m benchmarks.inspector times
}

// -- routing ------------------------------------------------------------------------------------------
async function route() {
  state.route += 1;  // answers still on their way for the page left behind become Stale
  syncClock();
  const path = location.pathname.replace(/^\/ui\/?/, "");
  const p = params();
  document.getElementById("q").value = p.get("q") || "";
  try {
    if (path.startsWith("cell/")) return await cellView(decodeURIComponent(path.slice(5)));
    if (path.startsWith("graph/")) return await graphView(decodeURIComponent(path.slice(6)));
    if (path === "changes") return await changesView(p);
    return await homeView(p);
  } catch (e) {
    if (e.status === 401) return askToken(e);
    failed(e);
  }
}

function go(url, replace) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  return route();
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-nav]");
  if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  go(a.getAttribute("href")).then(() => document.getElementById("view").focus({preventScroll: true}));
});
window.addEventListener("popstate", () => route());

// -- the clock: time travel ----------------------------------------------------------------------------
function syncClock() {
  const slider = document.getElementById("slider");
  const input = document.getElementById("as-of");
  const n = asOf();
  slider.max = String(state.last);
  input.max = String(state.last);
  slider.value = String(n === null ? state.last : n);
  input.value = n === null ? "" : String(n);
  input.placeholder = `now (${state.last})`;
  slider.setAttribute("aria-valuetext", n === null ? `now, event ${state.last}` : `event ${n}`);
}

function travel(n) {
  const url = new URL(location.href);
  if (n === null || n >= state.last) url.searchParams.delete("as_of");
  else url.searchParams.set("as_of", String(Math.max(0, n)));
  return go(url.pathname + url.search, true);
}

function setupClock() {
  const slider = document.getElementById("slider");
  const input = document.getElementById("as-of");
  let pending = null;
  slider.addEventListener("input", () => {  // one redraw at a time; the newest position wins
    pending = Number(slider.value);
    if (slider.dataset.busy) return;
    slider.dataset.busy = "1";
    (async () => {
      while (pending !== null) { const n = pending; pending = null; await travel(n); }
      delete slider.dataset.busy;
    })();
  });
  input.addEventListener("change", () => travel(input.value === "" ? null : Number(input.value)));
  document.getElementById("now").addEventListener("click", () => travel(null));
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    start();
  });
  document.getElementById("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = document.getElementById("q").value.trim();
    go(withAsOf("/ui/", q ? {q} : {}));
  });
  document.addEventListener("keydown", (ev) => {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (typing) return;
    if (ev.key === "/") { ev.preventDefault(); document.getElementById("q").focus(); }
    const n = asOf() === null ? state.last : asOf();
    if (ev.key === "[") travel(n - 1);
    if (ev.key === "]") travel(n + 1);
  });
}

function when() {
  const n = asOf();
  return n === null ? `now (event ${state.last})` : `as of event ${n}`;
}

// -- search and frontier ------------------------------------------------------------------------------
async function homeView(p) {
  const q = p.get("q");
  const filters = filterForm(p);
  const changes = changesForm(p.get("since") || "", asOf() ?? state.last);
  if (q) {
    const found = await api("/v1/search", {q, k: 20, as_of: asOf()});
    return show(h("div", {class: "split"},
      h("section", {}, h("h1", {}, `Search: ${q}`), h("p", {class: "muted"}, `${found.length} cells, ${when()}`),
        cellList(found)),
      h("aside", {}, filters, changes)));
  }
  const query = {as_of: asOf(), contested: p.get("contested") === "1", since: p.get("since"),
                 node_type: p.get("type"), cursor: p.get("cursor"), limit: 50};
  const page = await api("/v1/inspect/frontier", query);
  const more = page.next_cursor
    ? link(withAsOf("/ui/", {...Object.fromEntries(p), cursor: page.next_cursor}), "Next page →") : null;
  show(h("div", {class: "split"},
    h("section", {}, h("h1", {}, "Frontier"), h("p", {class: "muted"}, `${describe(p)}, ${when()}`),
      cellList(page.cells), more),
    h("aside", {}, filters, changes)));
}

function describe(p) {
  const parts = [];
  if (p.get("contested") === "1") parts.push("contested only");
  if (p.get("since")) parts.push(`changed since event ${p.get("since")}`);
  if (p.get("type")) parts.push(`node type ${p.get("type")}`);
  return parts.length ? parts.join(", ") : "every cell";
}

function cellList(cells) {
  if (!cells.length) return h("p", {class: "muted"}, "No cells.");
  return h("ul", {class: "cells"}, cells.map((c) => h("li", {},
    link(cellUrl(c.key), c.key, {class: "key"}), " ",
    h("span", {class: "value"}, c.value === null ? "(empty)" : clip(c.value, 80)), " ", badge(c.status),
    c.alternatives && c.alternatives.length ? h("span", {class: "alts"}, ` vs ${c.alternatives.join(" | ")}`) : null,
    " ", link(graphUrl(c.key), "graph", {class: "small", "aria-label": `graph of ${c.key}`}))));
}

function filterForm(p) {
  const since = h("input", {id: "f-since", name: "since", type: "number", min: 0, value: p.get("since") || ""});
  const type = h("select", {id: "f-type", name: "type"},
    ["", "relationship", "event", "persona"].map((t) => h("option", {value: t, selected: p.get("type") === t},
                                                                    t || "any")));
  const contested = h("input", {id: "f-contested", name: "contested", type: "checkbox", value: "1",
                                checked: p.get("contested") === "1"});
  const form = h("form", {class: "card", id: "filters"}, h("h2", {}, "Filter the frontier"),
    h("label", {}, contested, " contested only"),
    h("label", {for: "f-since"}, "changed since event"), since,
    h("label", {for: "f-type"}, "node type"), type,
    h("button", {type: "submit"}, "Apply"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = {};
    if (contested.checked) q.contested = "1";
    if (since.value !== "") q.since = since.value;
    if (type.value) q.type = type.value;
    go(withAsOf("/ui/", q));
  });
  return form;
}

function changesForm(since, until) {
  const a = h("input", {id: "c-since", type: "number", min: 0, required: true, value: since});
  const b = h("input", {id: "c-until", type: "number", min: 0, value: until});
  const form = h("form", {class: "card", id: "changes-form"}, h("h2", {}, "What changed"),
    h("label", {for: "c-since"}, "between event"), a, h("label", {for: "c-until"}, "and event"), b,
    h("button", {type: "submit"}, "Compare"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams({since: a.value});
    if (b.value !== "") q.set("until", b.value);
    go(`/ui/changes?${q}`);
  });
  return form;
}

async function changesView(p) {
  const since = Number(p.get("since") || 0);
  const until = p.get("until") === null || p.get("until") === "" ? null : Number(p.get("until"));
  const out = await api("/v1/inspect/changes", {since, until, limit: 500});
  const head = (x) => (x ? h("span", {}, clip(x.value, 60), " ", badge(x.status)) : h("span", {class: "muted"}, "empty"));
  const rows = out.cells.map((c) => h("tr", {},
    h("td", {}, link(`/ui/cell/${encodeURIComponent(c.key)}${until === null ? "" : `?as_of=${until}`}`, c.key)),
    h("td", {}, head(c.before)), h("td", {}, head(c.after))));
  show(h("div", {class: "split"},
    h("section", {}, h("h1", {}, `What changed between event ${since} and ${until === null ? "now" : `event ${until}`}`),
      h("p", {class: "muted"}, `${out.count} cells whose head differs${out.count > out.cells.length ? ` (first ${out.cells.length})` : ""}`),
      rows.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "cell"), h("th", {}, `at ${since}`),
        h("th", {}, until === null ? "now" : `at ${until}`))), h("tbody", {}, rows)) : h("p", {}, "Nothing changed.")),
    h("aside", {}, changesForm(String(since), until === null ? state.last : until))));
}

// -- a cell's story -----------------------------------------------------------------------------------
async function cellView(key) {
  const n = asOf();
  const [cell, history, events] = await Promise.all([
    api(`/v1/cells/${encodeURIComponent(key)}`, {as_of: n, disclose: "history,alternatives,support"}),
    api(`/v1/cells/${encodeURIComponent(key)}/history`, {as_of: n}),
    api(`/v1/inspect/cells/${encodeURIComponent(key)}/events`, {as_of: n})]);
  const byIndex = new Map(events.events.map((e) => [e.event_index, e]));
  show(h("div", {class: "split"},
    h("section", {id: "cell"},
      h("h1", {}, cell.key),
      h("p", {class: "current"}, h("span", {class: "value", id: "current-value"},
        cell.value === null ? "(empty)" : cell.value), " ", badge(cell.status),
        h("span", {class: "muted"}, ` ${when()}`)),
      contested(cell, history),
      h("h2", {}, "Versions on the event timeline"), timeline(history.versions, events.events),
      versionsTable(history.versions, byIndex),
      h("h2", {}, "Receipts: why each change happened"), receipts(events.events)),
    h("aside", {},
      h("div", {class: "card"}, h("h2", {}, "Support"), support(cell.support)),
      h("div", {class: "card"}, h("h2", {}, "Around it"), link(graphUrl(cell.key), "Graph neighbourhood →"),
        h("p", {class: "muted"}, "Press [ or ] to step one event; the slider above moves through time.")))));
}

function contested(cell, history) {
  if (cell.status !== "contested") return null;
  const open = history.versions.filter((v) => v.status === "contested" || v.status === "alternative");
  return h("div", {class: "card contested", id: "contested"},
    h("h2", {}, "Contested: held open, not guessed"),
    h("ul", {}, open.map((v) => h("li", {}, h("strong", {}, v.value), ` — trust ${v.trust}, support ${v.support}`,
      v.sources.length ? `, from ${v.sources.join(", ")}` : "", " ", badge(v.status === "contested" ? "head" : "alternative")))));
}

function support(sup) {
  if (!sup) return h("p", {class: "muted"}, "No head.");
  return h("p", {}, `trust ${sup.trust}, support ${sup.count}`, sup.sources.length ? `, from ${sup.sources.join(", ")}` : "");
}

const COLOURS = {active: "#1b7f3b", contested: "#b26b00", alternative: "#b26b00", superseded: "#6b7280",
                 revoked: "#b42318", rejected: "#b42318", contradicted: "#7c3aed", retracted: "#b42318"};

function timeline(versions, events) {
  if (!versions.length) return h("p", {class: "muted"}, "No versions.");
  const end = asOf() === null ? state.last : asOf();
  const first = Math.min(...versions.map((v) => v.opened_at));
  const last = Math.max(end, ...events.map((e) => e.event_index));
  const width = 720, left = 200, row = 26, top = 22;
  const span = Math.max(1, last - first + 1);
  const x = (i) => left + ((i - first) / span) * (width - left - 10);
  const height = top + versions.length * row + 8;
  const svg = s("svg", {viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "timeline",
                        "aria-label": `versions of the cell between event ${first} and ${last}`});
  for (const e of events) {
    svg.append(s("line", {x1: x(e.event_index), x2: x(e.event_index), y1: 14, y2: height - 4, class: "tick"}),
      s("text", {x: x(e.event_index), y: 11, class: "tick-label"}, `#${e.event_index}`));
  }
  versions.forEach((v, i) => {
    const y = top + i * row;
    svg.append(s("text", {x: 4, y: y + 15, class: "v-label"}, `${clip(v.value, 18)} (${v.status})`));
    for (const [a, b] of v.intervals) {
      const x2 = x(b === null ? last + 1 : b);
      svg.append(s("rect", {x: x(a), y: y + 3, width: Math.max(3, x2 - x(a)), height: row - 8, rx: 3,
                            fill: COLOURS[v.status] || "#374151"},
                   s("title", {}, `${v.value}: open #${a}–${b === null ? "now" : "#" + b}`)));
    }
  });
  return svg;
}

function versionsTable(versions, byIndex) {
  const value = new Map(versions.map((v) => [v.vid, v.value]));
  const rows = versions.map((v) => h("tr", {class: `v-${v.status}`},
    h("td", {class: "value"}, v.value), h("td", {}, badge(v.status)),
    h("td", {}, v.intervals.map(([a, b]) => `#${a}–${b === null ? "now" : "#" + b}`).join(", ")),
    h("td", {}, v.supersedes === null ? "" : `supersedes ${value.get(v.supersedes)}`,
      v.alternative_of === null ? "" : `alternative of ${value.get(v.alternative_of)}`),
    h("td", {}, String(v.trust)), h("td", {}, String(v.support)), h("td", {}, v.sources.join(", ")),
    h("td", {}, v.evidence.map((i) => {
      const e = byIndex.get(i);
      return h("div", {}, h("a", {href: "#", onclick: (ev) => { ev.preventDefault(); travel(i); }}, `#${i}`),
        e && e.text ? ` “${clip(e.text, 80)}”` : "");
    }))));
  return h("table", {id: "versions"}, h("thead", {}, h("tr", {}, ["value", "status", "open", "edge", "trust",
    "support", "sources", "evidence"].map((t) => h("th", {}, t)))), h("tbody", {}, rows));
}

function receipts(events) {
  if (!events.length) return h("p", {class: "muted"}, "No events.");
  const rows = events.map((e) => h("tr", {class: e.applied ? "" : "not-applied"},
    h("td", {}, h("a", {href: "#", title: "read the memory as of this event",
                        onclick: (ev) => { ev.preventDefault(); travel(e.event_index); }}, `#${e.event_index}`)),
    h("td", {}, e.requested || e.op), h("td", {}, e.applied ? e.op : `not applied (${e.op})`),
    h("td", {}, e.value === null || e.value === undefined ? "" : clip(e.value, 40)),
    h("td", {}, e.source || ""), h("td", {}, e.trust === undefined ? "" : String(e.trust)),
    h("td", {}, e.reason || ""), h("td", {}, e.text ? clip(e.text, 80) : "")));
  return h("table", {id: "receipts"}, h("thead", {}, h("tr", {}, ["event", "requested", "applied", "value",
    "source", "trust", "reason", "evidence text"].map((t) => h("th", {}, t)))), h("tbody", {}, rows));
}

// -- the graph neighbourhood --------------------------------------------------------------------------
// Now, what_next reads stored scores (a top-k query); at an earlier time it ranks that moment's whole graph,
// which on a large store takes long: above this many events, that waits for a click.
const NEXT_AUTO_EVENTS = 10000;

async function graphView(key) {
  const hood = await api("/v1/inspect/neighbourhood", {of: key, as_of: asOf(), depth: 1});
  state.graph = {key, nodes: new Map(hood.nodes.map((n) => [n.id, n])), edges: hood.edges, selected: null};
  const panel = h("div", {class: "card", id: "node-panel"}, h("p", {class: "muted"},
    "Click a node (or focus it and press Enter) to list its cells and expand it."));
  const next = h("div", {class: "card", id: "what-next"}, h("h2", {}, "What to ask next"));
  show(h("div", {class: "split"},
    h("section", {}, h("h1", {}, `Graph around ${key}`), h("p", {class: "muted"},
      `${hood.nodes.length} entities, ${when()}${hood.truncated ? " (cut at the nearest 60)" : ""}`),
      h("div", {id: "graph"})),
    h("aside", {}, panel, next)));
  drawGraph();
  if (asOf() === null || state.last <= NEXT_AUTO_EVENTS) return whatNext(next);
  next.append(h("p", {class: "muted"}, `Ranks the whole graph as it was then: slow on a store of ${state.last} events (the rest of the page stays usable).`),
    h("button", {type: "button", id: "compute-next", onclick: () => whatNext(next)}, "Compute"));
}

async function whatNext(card) {
  card.replaceChildren(h("h2", {}, "What to ask next"), h("p", {class: "muted"}, "Ranking…"));
  const drawn = state.drawn;
  let next;
  try { next = await api("/v1/inspect/next", {k: 5, as_of: asOf()}); } catch (e) { return failed(e); }
  if (drawn !== state.drawn) return;  // the view changed meanwhile
  card.replaceChildren(h("h2", {}, "What to ask next"), next.length
    ? h("ol", {}, next.map((p) => h("li", {}, link(graphUrl(p.entity), p.text),
        h("span", {class: "muted"}, ` — ${p.gap}, score ${p.score}`))))
    : h("p", {class: "muted"}, "Nothing open."));
}

function layout(nodes) {
  const rings = new Map();
  for (const n of nodes) {
    if (!rings.has(n.hops)) rings.set(n.hops, []);
    rings.get(n.hops).push(n);
  }
  const cx = 430, cy = 300, pos = new Map();
  for (const [hop, ring] of rings) {
    ring.sort((a, b) => a.id.localeCompare(b.id));
    const r = hop === 0 ? (ring.length > 1 ? 70 : 0) : 70 + hop * 120;
    ring.forEach((n, i) => {
      const t = (2 * Math.PI * i) / ring.length - Math.PI / 2 + hop * 0.35;
      pos.set(n.id, [cx + r * Math.cos(t) * 1.35, cy + r * Math.sin(t)]);
    });
  }
  return pos;
}

function drawGraph() {
  const g = state.graph;
  const nodes = [...g.nodes.values()];
  const pos = layout(nodes);
  const svg = s("svg", {viewBox: "0 0 860 600", width: 860, height: 600, role: "group", class: "graph",
                        "aria-label": `entity graph, ${nodes.length} entities`});
  svg.append(s("defs", {}, s("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 19, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse"}, s("path", {d: "M 0 0 L 10 5 L 0 10 z", class: "arrow"}))));
  for (const e of g.edges) {
    const [a, b] = [pos.get(e.src), pos.get(e.dst)];
    if (!a || !b) continue;
    svg.append(s("line", {x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: `edge ${e.kind}`,
                          "marker-end": e.kind === "prerequisite" ? "url(#arrow)" : null}));
  }
  for (const n of nodes) {
    const [x, y] = pos.get(n.id);
    const label = clip(n.label, 26);
    const node = s("g", {class: `node ${n.kind}${n.confirmed ? "" : " gap"}${g.selected === n.id ? " selected" : ""}`,
      tabindex: 0, role: "button", "data-id": n.id, transform: `translate(${x},${y})`,
      "aria-label": `${n.label}, ${n.kind}, ${n.cells.length} cells`},
      s("circle", {r: n.hops === 0 ? 12 : 9}), s("title", {}, `${n.label} (${n.kind})`),
      s("text", {y: 26, class: "label"}, label));
    node.addEventListener("click", () => selectNode(n.id));
    node.addEventListener("dblclick", () => { if (n.cells.length) go(cellUrl(n.cells[0])); });
    node.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); selectNode(n.id); }
      if (ev.key === "+") { ev.preventDefault(); expand(n.id); }
    });
    svg.append(node);
  }
  document.getElementById("graph").replaceChildren(svg);
  const legend = h("p", {class: "legend muted"}, "Arrows: prerequisites (known first); dashed: associations; ",
    "purple: relationship, teal: event, blue: persona; hollow: not yet known or contested. Enter: open, +: expand.");
  document.getElementById("graph").append(legend);
}

function selectNode(id) {
  const g = state.graph;
  g.selected = id;
  const n = g.nodes.get(id);
  const cells = n.cells.length
    ? h("ul", {class: "cells"}, n.cells.map((k) => h("li", {}, link(cellUrl(k), k, {class: "key"}),
        n.contested.includes(k) ? badge("contested") : null)))
    : h("p", {class: "muted"}, "No cells of its own: it is only named as a value.");
  const panel = document.getElementById("node-panel");
  panel.replaceChildren(h("h2", {}, n.label), h("p", {class: "muted"}, `${n.kind}, ${n.confirmed ? "known" : "open"}`),
    cells, h("button", {type: "button", id: "expand", onclick: () => expand(id)}, "Expand"),
    " ", link(graphUrl(id), "Centre here"));
  drawGraph();
  const first = panel.querySelector("a");
  if (first) first.focus();
}

async function expand(id) {
  const g = state.graph;
  const from = g.nodes.get(id);
  try {
    const more = await api("/v1/inspect/neighbourhood", {of: id, as_of: asOf(), depth: 1});
    for (const n of more.nodes) if (!g.nodes.has(n.id)) g.nodes.set(n.id, {...n, hops: from.hops + 1});
    const seen = new Set(g.edges.map((e) => `${e.src}\u0000${e.dst}\u0000${e.kind}`));
    for (const e of more.edges) if (!seen.has(`${e.src}\u0000${e.dst}\u0000${e.kind}`)) g.edges.push(e);
    drawGraph();
    const el = document.querySelector(`.node[data-id="${CSS.escape(id)}"]`);
    if (el) el.focus();
  } catch (e) { failed(e); }
}

setupClock();
start();
