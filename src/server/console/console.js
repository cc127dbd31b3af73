// The saql console: polls /api/overview (the rows of SHOW STREAMS and SHOW QUERIES) every
// second for the tables, and opens a server-sent-events stream per charted query
// (/queries/<name>/events: SUBSCRIBE name WITH (SEQ, SNAPSHOT)) whose rows it draws as SVG.
// No libraries: this file, console.css and index.html are all there is.
"use strict";

const POLL_MS = 1000;
// Browsers open at most 6 HTTP/1.1 connections to one server; one is the poll.
const MAX_CHARTS = 4;
const WINDOW_MS = 10 * 60 * 1000;
const MAX_POINTS = 2000;
const SVG = "http://www.w3.org/2000/svg";
const W = 560, H = 170, LEFT = 52, RIGHT = 10, TOP = 10, BOTTOM = 22;

const token = new URLSearchParams(location.search).get("token");
const charts = new Map(); // query name -> chart
const unpinned = new Set(); // queries whose chart the user closed: not opened again by itself
let previous = null; // the last overview, for rates

function withToken(url) {
  return token ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : url;
}

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n) {
  return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 });
}

// --- tables -------------------------------------------------------------------------------

function rate(kind, name, field, now, row) {
  if (!previous) return "";
  const before = previous[kind].find((r) => r.name === name);
  const dt = (now - previous.at) / 1000;
  if (!before || dt <= 0) return "";
  return fmt(Math.max(0, (row[field] - before[field]) / dt));
}

// A query being created WITH (start = ...) has the status "backfilling: 45% (12345 of 27000
// history rows), event time reached 2026-01-01 00:10:00" (it cannot be subscribed to yet),
// one being altered WITH (start = ...) "running; rebuilding: 45% (...)"; null for any other.
function backfillProgress(status) {
  const m = /^(backfilling|running; rebuilding): (\d+)% \((\d+) of (\d+) history rows\), event time reached (.*)$/.exec(status);
  return m && {
    creating: m[1] === "backfilling", what: m[1].replace("running; ", ""),
    percent: Number(m[2]), read: Number(m[3]), total: Number(m[4]), reached: m[5],
  };
}

function renderTables(overview, now) {
  const qbody = document.querySelector("#queries tbody");
  qbody.replaceChildren();
  for (const q of overview.queries) {
    const tr = el("tr", { "data-query": q.name });
    if (charts.has(q.name)) tr.classList.add("pinned");
    const backfill = backfillProgress(q.status);
    if (backfill) tr.classList.add("backfilling");
    else if (q.status !== "running") tr.classList.add("failed");
    const cells = [
      [q.name], [q.stream], [q.status],
      [fmt(q.rows_in), "n"], [rate("queries", q.name, "rows_in", now, q), "n"],
      [fmt(q.rows_out), "n"], [fmt(q.subscribers), "n"], [fmt(q.state_bytes), "n"],
    ];
    for (const [text, cls] of cells) tr.append(el("td", cls ? { class: cls } : {}, text));
    if (backfill) {
      // The status cell: a bar for the share of history read, the event time reached below.
      const cell = tr.children[2];
      cell.replaceChildren(
        el("progress", { max: backfill.total || 1, value: backfill.read }),
        el("span", {}, ` ${backfill.what} ${backfill.percent}%`),
        el("div", { class: "hint" }, `${fmt(backfill.read)} of ${fmt(backfill.total)} rows, at ${backfill.reached}`),
      );
      cell.title = q.status;
    }
    tr.addEventListener("click", () => (backfill && backfill.creating) || toggleChart(q.name));
    qbody.append(tr);
  }
  const sbody = document.querySelector("#streams tbody");
  sbody.replaceChildren();
  for (const s of overview.streams) {
    const tr = el("tr", { "data-stream": s.name });
    const cells = [
      [s.name], [fmt(s.rows_in), "n"], [rate("streams", s.name, "rows_in", now, s), "n"],
      [fmt(s.late_rows), "n"], [fmt(s.shed_rows), "n"], [s.watermark || ""],
      [s.history === "off" ? "off" : `${s.history}: ${fmt(s.history_rows)} rows, ${fmt(s.history_bytes)} B`],
    ];
    for (const [text, cls] of cells) tr.append(el("td", cls ? { class: cls } : {}, text));
    sbody.append(tr);
  }
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const res = await fetch(withToken("api/overview"), { cache: "no-store" });
    if (!res.ok) throw new Error(res.status + " " + (await res.text()));
    const overview = await res.json();
    const now = Date.now();
    for (const q of overview.queries) {
      // A backfilling query cannot be subscribed to until its backfill ends.
      const progress = backfillProgress(q.status);
      const ready = !(progress && progress.creating);
      if (ready && q.rows_out > 0 && !charts.has(q.name) && !unpinned.has(q.name) && charts.size < MAX_CHARTS) {
        openChart(q.name);
      }
    }
    renderTables(overview, now);
    previous = { ...overview, at: now };
    status.textContent = `live: ${overview.streams.length} streams, ${overview.queries.length} queries, ` +
      `updated ${new Date(now).toLocaleTimeString()}`;
    status.classList.remove("down");
  } catch (e) {
    status.textContent = "cannot reach saql: " + e.message;
    status.classList.add("down");
  }
  for (const chart of charts.values()) draw(chart);
  setTimeout(poll, POLL_MS);
}

// --- charts -------------------------------------------------------------------------------

function toggleChart(name) {
  if (charts.has(name)) {
    closeChart(name);
    unpinned.add(name);
  } else {
    unpinned.delete(name);
    if (charts.size >= MAX_CHARTS) closeChart(charts.keys().next().value);
    openChart(name);
  }
  const row = document.querySelector(`#queries tr[data-query="${CSS.escape(name)}"]`);
  if (row) row.classList.toggle("pinned", charts.has(name));
}

function closeChart(name) {
  const chart = charts.get(name);
  if (!chart) return;
  chart.source.close();
  chart.box.remove();
  charts.delete(name);
  if (charts.size === 0) document.getElementById("no-charts").hidden = false;
}

function openChart(name) {
  document.getElementById("no-charts").hidden = true;
  const box = el("div", { class: "chart", "data-query": name });
  const title = el("h3");
  const count = el("span", { class: "count" }, "0 alerts");
  title.append(el("span", {}, name), count);
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img" });
  const last = el("p", { class: "last" });
  const error = el("p", { class: "error" });
  box.append(title, svg, last, error);
  document.getElementById("charts").append(box);
  const source = new EventSource(withToken(`queries/${encodeURIComponent(name)}/events`));
  const chart = { name, box, svg, count, last, error, source, points: [], alerts: 0, timeCol: null, valueCol: null };
  charts.set(name, chart);
  source.addEventListener("schema", (ev) => {
    const schema = JSON.parse(ev.data);
    const cols = schema.columns.filter((c) => c.name !== "seq");
    const time = cols.find((c) => c.kind === "time" && c.name === "window_end") || cols.find((c) => c.kind === "time");
    const value = cols.find((c) => c.kind === "number");
    chart.timeCol = time ? time.name : null;
    chart.valueCol = value ? value.name : null;
    chart.error.textContent = "";
  });
  source.addEventListener("rows", (ev) => {
    const arrived = Date.now();
    for (const row of JSON.parse(ev.data)) addPoint(chart, row, arrived);
    draw(chart);
  });
  source.addEventListener("failed", (ev) => {
    const f = JSON.parse(ev.data);
    chart.error.textContent = `${f.sqlstate}: ${f.message}`;
    source.close();
  });
}

function parseTime(text) {
  if (typeof text !== "string") return NaN;
  // Arrow writes "2024-01-01T00:00:00.123456789" (UTC, no zone): keep milliseconds.
  const m = text.match(/^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(\.\d{1,3})?\d*(Z|[+-]\d\d:?\d\d)?$/);
  if (!m) return Date.parse(text);
  return Date.parse(`${m[1]}T${m[2]}${m[3] || ""}${m[4] || "Z"}`);
}

function addPoint(chart, row, arrived) {
  let t = chart.timeCol ? parseTime(row[chart.timeCol]) : NaN;
  if (!Number.isFinite(t)) t = arrived;
  let v = chart.valueCol ? Number(row[chart.valueCol]) : NaN;
  if (!Number.isFinite(v)) v = 1;
  chart.points.push({ t, v, seq: row.seq, row });
  if (chart.points.length > MAX_POINTS) chart.points.splice(0, chart.points.length - MAX_POINTS);
  chart.alerts += 1;
  chart.count.textContent = `${fmt(chart.alerts)} alert${chart.alerts === 1 ? "" : "s"}`;
  chart.last.textContent = "last: " + JSON.stringify(row);
}

function timeLabel(t) {
  return new Date(t).toISOString().slice(11, 19);
}

function draw(chart) {
  const svg = chart.svg;
  svg.replaceChildren();
  const now = Date.now();
  const latest = chart.points.reduce((m, p) => Math.max(m, p.t), -Infinity);
  // Live data slides with the clock; replayed or old data shows its own last ten minutes.
  const tmax = !Number.isFinite(latest) || Math.abs(now - latest) < WINDOW_MS ? Math.max(now, latest) : latest;
  const tmin = tmax - WINDOW_MS;
  const shown = chart.points.filter((p) => p.t >= tmin && p.t <= tmax).sort((a, b) => a.t - b.t);
  let vmin = Math.min(0, ...shown.map((p) => p.v));
  let vmax = Math.max(...shown.map((p) => p.v), vmin + 1);
  vmax += (vmax - vmin) * 0.1;
  const x = (t) => LEFT + ((t - tmin) / (tmax - tmin)) * (W - LEFT - RIGHT);
  const y = (v) => TOP + (1 - (v - vmin) / (vmax - vmin)) * (H - TOP - BOTTOM);
  for (let i = 0; i <= 4; i++) {
    const v = vmin + ((vmax - vmin) * i) / 4;
    svg.append(el("svg:line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }));
    svg.append(el("svg:text", { class: "axis-label", x: LEFT - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  }
  for (let i = 0; i <= 5; i++) {
    const t = tmin + ((tmax - tmin) * i) / 5;
    const anchor = i === 0 ? "start" : i === 5 ? "end" : "middle";
    svg.append(el("svg:text", { class: "axis-label", x: x(t), y: H - 6, "text-anchor": anchor }, timeLabel(t)));
  }
  if (chart.valueCol) {
    svg.append(el("svg:text", { class: "axis-label", x: LEFT + 4, y: TOP + 8 }, chart.valueCol));
  }
  if (shown.length > 1) {
    const line = shown.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg.append(el("svg:polyline", { class: "values", points: line }));
  }
  for (const p of shown) {
    const dot = el("svg:circle", {
      class: "alert", cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 4,
      "data-query": chart.name, "data-seq": p.seq,
    });
    dot.append(el("svg:title", {}, JSON.stringify(p.row)));
    svg.append(dot);
  }
}

poll();
