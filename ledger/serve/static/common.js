// What every page of `ledger serve` shares: building elements (text only: no string from
// the ledger is ever parsed as HTML), the JSON endpoints, polling, charts, the URL's state.
"use strict";

const L = (window.L = {});

// State the browser tests read: how many times each part was drawn, and the last figures.
window.ledgerServe = { version: null, renders: {}, points: {}, drawnAt: {}, errors: [] };

L.el = function (tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined) continue;
    if (key === "class") e.className = value;
    else if (key === "text") e.textContent = String(value);
    else e.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    e.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return e;
};

L.runLink = function (name) {
  return L.el("a", { href: "/run?run=" + encodeURIComponent(name), class: "run", text: name });
};

L.section = function (id, title) {
  let s = document.getElementById(id);
  if (!s) {
    s = L.el("section", { id: id });
    document.getElementById("main").append(s);
  }
  s.replaceChildren(L.el("h2", { text: title }));
  return s;
};

L.table = function (headers, rows, cls) {
  const head = L.el("tr", {}, ...headers.map((h) => L.el("th", { text: h })));
  const body = rows.map((cells) =>
    L.el("tr", {}, ...cells.map((c) => (c instanceof Node && c.tagName === "TD" ? c : L.el("td", {}, c))))
  );
  return L.el("table", { class: cls || null }, L.el("thead", {}, head), L.el("tbody", {}, ...body));
};

L.cell = function (content, props) {
  return L.el("td", props || {}, content);
};

L.query = function (params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
};

L.api = async function (path, params) {
  const response = await fetch(path + L.query(params), { credentials: "same-origin" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
};

L.setLive = function (ok, text) {
  const live = document.getElementById("live");
  live.textContent = ok ? "live" : "disconnected: " + text;
  live.className = ok ? "live ok" : "live down";
};

L.problem = function (text) {
  let p = document.getElementById("problem");
  if (!text) {
    if (p) p.remove();
    return;
  }
  if (!p) {
    p = L.el("p", { id: "problem", class: "problem" });
    document.getElementById("title").after(p);
  }
  p.textContent = text;
};

L.note = function (text, cls) {
  return L.el("p", { class: cls || "note", text: text });
};

L.mark = function (part) {
  const s = window.ledgerServe;
  s.renders[part] = (s.renders[part] || 0) + 1;
  s.drawnAt[part] = performance.now();
};

// Poll the ledger's version every second; when it changed, redraw (`refresh`) unless a
// redraw is still running, and call `quick` (what must show at once, e.g. a new run) anyway.
L.poll = function (refresh, quick) {
  let last = null;
  let drawn = null;
  let busy = false;
  // `version` is asked for before the data, so the page is at least that new.
  async function redraw(version) {
    busy = true;
    try {
      await refresh();
      drawn = await version;
      window.ledgerServe.version = drawn;
      L.problem(null);
    } catch (e) {
      // the ledger's own words (no such run, too few steps): shown on the page, as text
      window.ledgerServe.errors.push(e.message);
      L.problem(e.message);
    } finally {
      busy = false;
    }
  }
  const version = () => L.api("/api/version").then((answer) => answer.version);
  async function tick() {
    try {
      const v = await version();
      L.setLive(true);
      if (v !== last && quick && last !== null) await quick();
      last = v;
      if (v !== drawn && !busy) redraw(Promise.resolve(v));
    } catch (e) {
      L.setLive(false, e.message);
      window.ledgerServe.errors.push(e.message);
    }
    setTimeout(tick, 1000);
  }
  redraw(version()); // at once: no round trip before the first draw
  setTimeout(tick, 1000);
};

L.params = function () {
  return new URLSearchParams(window.location.search);
};

// Keep the page's state in its address (run, runs compared, zoom) without a reload.
L.setParams = function (changes) {
  const q = L.params();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") q.delete(k);
    else q.set(k, v);
  }
  const s = q.toString();
  history.replaceState(null, "", window.location.pathname + (s ? "?" + s : ""));
};

L.COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

// A uPlot chart in `holder`, made again only when its series change; `data` as uPlot's.
L.charts = {};
L.chart = function (holder, key, options, data) {
  const width = Math.max(300, holder.clientWidth || 900);
  const old = L.charts[key];
  const shape = JSON.stringify(options.series.map((s) => s.label));
  if (old && old.shape === shape && old.plot.root.isConnected) {
    old.plot.setData(data);
    return old.plot;
  }
  if (old) old.plot.destroy();
  holder.replaceChildren();
  const plot = new uPlot(Object.assign({ width: width, height: options.height || 240 }, options), data, holder);
  L.charts[key] = { plot: plot, shape: shape };
  return plot;
};

L.fmt = function (v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return "-";
  return Number(v).toPrecision(digits || 4);
};

L.when = function (iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toLocaleString();
};

// Draw vertical marks at steps (change points, stalls, events) on a chart's canvas.
L.vlines = function (u, steps, color, dash, top) {
  const ctx = u.ctx;
  const { left, top: y0, width, height } = u.bbox;
  ctx.save();
  ctx.strokeStyle = color;
  ctx.lineWidth = 1 * devicePixelRatio;
  ctx.setLineDash(dash || []);
  for (const s of steps) {
    const x = u.valToPos(s, "x", true);
    if (x < left || x > left + width) continue;
    ctx.beginPath();
    ctx.moveTo(x, top ? y0 : y0);
    ctx.lineTo(x, top ? y0 + height * 0.08 : y0 + height);
    ctx.stroke();
  }
  ctx.restore();
};
