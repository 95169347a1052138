// A run's page: its figures and decision, charts of its steps (downsampled by the server
// per pixel, minima and maxima kept), GPUs, ranks, events, deploy steps, probes, config, why.
"use strict";

const RUN = L.params().get("run") || "";
let zoom = { from: L.params().get("from"), to: L.params().get("to") };
let analysis = null;
let baseline = null;
let events = [];

function chartHolder(id, title) {
  const s = L.section(id, title);
  const holder = L.el("div", { class: "chart" });
  s.append(holder);
  return holder;
}

function zoomTo(from, to) {
  zoom = { from: from === null ? null : String(Math.floor(from)), to: to === null ? null : String(Math.ceil(to)) };
  L.setParams({ from: zoom.from, to: zoom.to });
  drawSeries();
}

// A drag on any chart zooms every chart (the server reads that range at full resolution).
function zoomHook(u) {
  const x = u.scales.x;
  if (x.min === null || x.max === null || !u._ledgerReady) return;
  // uPlot fits the axis to the data it holds, whose last x is the first step of the last
  // bucket (before the run's last step): that fit, made again each time the charts are
  // redrawn, is no zoom. Taken for one, each redraw narrowed the page by a bucket.
  const xs = u.data[0];
  if (xs.length && x.min <= xs[0] && x.max >= xs[xs.length - 1]) return;
  const full = u._ledgerFull;
  if (full && x.min <= full[0] && x.max >= full[1]) return;
  if (zoom.from !== null && Math.floor(x.min) === Number(zoom.from) && Math.ceil(x.max) === Number(zoom.to)) return;
  setTimeout(() => zoomTo(x.min, x.max), 0);
}

function stepChart(holder, key, series, data, marks, full) {
  const options = {
    height: 220,
    scales: { x: { time: false } },
    cursor: { sync: { key: "steps" } },
    legend: { live: true },
    axes: [{ label: "step" }, { size: 70 }],
    series: [{ label: "step" }, ...series],
    bands: series.length >= 2 && series[1].bandWith ? [{ series: [1, 2], fill: "rgba(31,119,180,0.15)" }] : [],
    hooks: { setScale: [(u, k) => k === "x" && zoomHook(u)], draw: [(u) => marks && marks(u)] },
  };
  const plot = L.chart(holder, key, options, data);
  plot._ledgerFull = full;
  plot._ledgerReady = true;
  const back = holder.querySelector(".reset") || L.el("button", { class: "reset", type: "button", text: "whole run" });
  back.onclick = () => zoomTo(null, null);
  holder.append(back);
  return plot;
}

function throughputMarks(u) {
  if (!analysis || analysis.not_analysed) return;
  const ctx = u.ctx;
  const { top, height } = u.bbox;
  const x0 = u.valToPos(analysis.first_step, "x", true);
  const x1 = u.valToPos(analysis.steady_from_step, "x", true);
  ctx.save();
  ctx.fillStyle = "rgba(128,128,128,0.15)"; // warm-up
  const left = Math.max(u.bbox.left, x0);
  const right = Math.min(u.bbox.left + u.bbox.width, x1);
  if (right > left) ctx.fillRect(left, top, right - left, height);
  ctx.restore();
  L.vlines(u, analysis.change_points.map((c) => c.step), "#9467bd", [5, 3]);
  const stalls = (analysis.stalls ? analysis.stalls.steps : []).concat(analysis.outlier_steps || []);
  L.vlines(u, stalls, "#d62728", [], true);
  L.vlines(u, events.filter((e) => e.step !== null && e.kind !== "progress").map((e) => e.step), "#ff7f0e", [2, 2], true);
}

let lastSeries = null;

async function drawSeries() {
  const holder = document.getElementById("throughput-chart");
  const width = Math.max(300, holder.clientWidth || 900);
  lastSeries = await L.api("/api/run/series", { run: RUN, width: width, from: zoom.from, to: zoom.to });
  window.ledgerServe.points.series = { width: width, buckets: lastSeries.steps.length, rows: lastSeries.rows };
  renderSeries();
  L.mark("series");
}

function held(s, names) {
  return names.some((n) => s.columns[n] && s.columns[n].high.some((v) => v !== null));
}

function renderSeries() {
  const s = lastSeries;
  if (!s) return;
  const full = [s.first_step, s.last_step];
  const col = (name, part) => (s.columns[name] ? s.columns[name][part] : s.steps.map(() => null));
  const flat = (v) => s.steps.map(() => (v === null || v === undefined ? null : v));
  const effective = analysis && !analysis.not_analysed ? analysis.judged_effective : null;
  const charts = [
    ["throughput", ["throughput"], [
      { label: "per step, max", stroke: "#1f77b4", bandWith: true },
      { label: "per step, min", stroke: "#6baed6" },
      { label: "effective", stroke: "#2ca02c", width: 2 },
      { label: "baseline", stroke: "#888", dash: [6, 4] },
    ], () => [s.steps, col("throughput", "high"), col("throughput", "low"), flat(effective), flat(baseline)], throughputMarks],
    ["loss", ["loss"], [{ label: "loss, max", stroke: "#d62728", bandWith: true }, { label: "loss, min", stroke: "#ff9896" }],
      () => [s.steps, col("loss", "high"), col("loss", "low")], null],
    ["steptime", ["step_time_s", "wait_s"], [{ label: "step time s, max", stroke: "#9467bd", bandWith: true }, { label: "step time s, min", stroke: "#c5b0d5" }, { label: "wait s, max", stroke: "#8c564b" }],
      () => [s.steps, col("step_time_s", "high"), col("step_time_s", "low"), col("wait_s", "high")], null],
    ["memory", ["memory_reserved_mib", "memory_allocated_mib"], [{ label: "reserved MiB, max", stroke: "#17becf" }, { label: "allocated MiB, max", stroke: "#2ca02c" }],
      () => [s.steps, col("memory_reserved_mib", "high"), col("memory_allocated_mib", "high")], null],
  ];
  for (const [key, names, series, data, marks] of charts) {
    const holder = document.getElementById(key + "-chart");
    if (!s.steps.length || !held(s, names)) {
      if (L.charts[key]) { L.charts[key].plot.destroy(); delete L.charts[key]; }
      holder.replaceChildren(L.note(s.steps.length ? "not recorded for this run" : "no steps yet"));
      continue;
    }
    stepChart(holder, key, series, data(), marks, full);
  }
  const ranks = Object.keys(s.per_rank);
  const rankHolder = document.getElementById("ranks-chart");
  if (ranks.length) {
    stepChart(rankHolder, "ranks", ranks.map((r, i) => ({ label: "rank " + r, stroke: L.COLORS[i % L.COLORS.length] })),
      [s.steps, ...ranks.map((r) => s.per_rank[r])], null, full);
  } else {
    rankHolder.replaceChildren(L.note(s.ranks ? "one rank" : "no steps yet"));
  }
}

function figuresSection(a, decisions, detail) {
  const s = L.section("figures", "Where it stands");
  const phase = detail.fate === "loading" ? "loading" : !a || a.not_analysed ? "warm-up / too few steps" : a.settled ? "steady from step " + a.steady_from_step.toLocaleString("en-US") : "not settled (judged on its second half)";
  const watch = decisions.find((d) => d.is_watch);
  s.append(
    L.el("p", { class: "phase" }, "Fate: ", L.el("b", { class: "fate fate-" + detail.fate, text: detail.fate }), detail.fate_reason ? " (" + detail.fate_reason + ")" : "", ". Phase: " + phase + ". Steps: " + detail.steps.toLocaleString("en-US") + ", ranks: " + detail.ranks + ".")
  );
  if (watch) {
    s.append(L.el("p", { class: "decision decision-" + watch.verdict }, "Watch decision: ", L.el("b", { text: watch.verdict }),
      watch.decided_at_step !== null ? " at step " + watch.decided_at_step.toLocaleString("en-US") : "", " — " + watch.summary));
  }
  if (!a || a.not_analysed) {
    s.append(L.note("Not analysed: " + (a ? a.not_analysed : "no steps")));
    return;
  }
  const rows = [
    ["Effective (judged)", a.effective_text + " " + (a.unit || ""), "effective"],
    ["95% CI", a.ci_text, "ci"],
    ["Median step", a.median_text, "median"],
    ["Of baseline", a.vs_baseline_text + (a.recovered === true ? " (recovered)" : a.recovered === false ? " (not recovered)" : ""), "of-baseline"],
    ["Steady window", a.n_steady.toLocaleString("en-US") + " steps from step " + a.steady_from_step.toLocaleString("en-US"), "steady"],
    ["Stalls", a.stalls ? a.stalls.recurring + " recurring (" + L.fmt(a.stalls.cost_pct, 3) + " % of the time), first at " + a.stalls.steps.join(", ") : "none", "stalls"],
    ["Change points", a.change_points.length ? a.change_points.map((c) => "step " + c.step.toLocaleString("en-US") + " (" + L.fmt(c.shift_pct, 3) + " %)").join("; ") : "none", "changes"],
  ];
  s.append(L.table(["", ""], rows.map(([k, v, cls]) => [L.cell(k), L.cell(v, { class: "num " + cls })]), "figures"));
  if (a.ranks) {
    s.append(L.el("p", {}, "Slowest of " + a.ranks.ranks + " ranks: rank " + a.ranks.slowest_rank + " (straggler); spread " + L.fmt(a.ranks.spread_pct, 3) + " %."));
    s.append(L.table(["Rank", "Median", "Steps"], a.ranks.per_rank.map((r) => [
      L.cell(String(r.rank), { class: r.rank === a.ranks.slowest_rank ? "straggler" : null }), L.cell(L.fmt(r.median, 5), { class: "num" }), L.cell(String(r.steps), { class: "num" }),
    ])));
  }
  if (decisions.length) {
    s.append(L.el("h3", { text: "Recorded decisions" }));
    s.append(L.table(["When", "Kind", "Against", "Verdict", "At step", "In words"], decisions.map((d) => [
      L.when(d.created_at), d.kind, d.a === null ? "baseline" : d.a, L.cell(d.verdict, { class: "verdict verdict-" + d.verdict }), d.decided_at_step === null ? "-" : String(d.decided_at_step), L.cell(d.summary, { class: "text" }),
    ]), "decisions"));
  }
}

function eventsSection(list) {
  const s = L.section("events", "Events (" + list.length + ")");
  if (!list.length) return s.append(L.note("no events"));
  const shown = list.filter((e) => e.kind !== "progress").slice(-300);
  s.append(L.table(["Step", "Kind", "Rank", "Line", "Text"], shown.map((e) => [
    L.cell(e.step === null ? "-" : L.el("a", { href: "#", class: "goto", "data-step": e.step, text: String(e.step) })),
    L.cell(e.kind, { class: "kind kind-" + e.kind }), e.rank === null ? "-" : String(e.rank), e.line === null ? "-" : String(e.line),
    L.cell(L.el("pre", { text: e.text }), { id: e.line === null ? null : "line-" + e.line }),
  ]), "events"));
}

function detailSections(d) {
  const h = L.section("change", "Hypothesis and patch");
  h.append(L.el("p", { class: "text" }, d.hypothesis ? "#" + d.hypothesis.id + " " + d.hypothesis.text + " (" + d.hypothesis.status + ")" : "no hypothesis"));
  if (d.patch) h.append(L.el("p", { class: "text" }, "Patch #" + d.patch.id + ": " + d.patch.summary + (d.patch.git_commit ? " (" + d.patch.git_commit + ")" : "")));
  if (d.command) h.append(L.el("p", {}, "Command: ", L.el("code", { text: d.command }), d.host ? " on " + d.host : ""));
  const launches = L.section("launches", "Launches");
  // Hook point: the store is gaining a run's launches; until Ledger.show() returns them,
  // the section says so instead of guessing them from deploy steps.
  if (Array.isArray(d.launches)) {
    launches.append(L.table(["#", "Started", "Ended", "Steps"], d.launches.map((x, i) => [String(i + 1), L.when(x.started_at), L.when(x.ended_at), String(x.steps ?? "-")])));
  } else {
    launches.append(L.note("This ledger does not record launches separately yet."));
  }
  const dep = L.section("deploys", "Deploy steps");
  dep.append(d.deploy_steps.length ? L.table(["Step", "Command", "Exit", "Drift", "Started"], d.deploy_steps.map((x) => [
    x.name, L.cell(L.el("code", { text: x.command })), x.exit_code === null ? (x.timed_out ? "timed out" : "-") : String(x.exit_code),
    L.cell(x.drift === true ? "DRIFT: " + (x.drift_reason || "") : x.drift === false ? "no drift" : x.drift_reason || "not checked", { class: x.drift ? "drift" : null }),
    L.when(x.started_at),
  ]), "deploys") : L.note("no deploy steps"));
  const pr = L.section("probes", "Probes");
  pr.append(d.probes.length ? L.table(["Command", "Exit", "Fate", "Conclusion", "GPUs"], d.probes.map((p) => [
    L.cell(L.el("code", { text: p.command })), p.exit_code === null ? "-" : String(p.exit_code), p.fate || "-", L.cell(p.conclusion || "-", { class: "text" }),
    p.gpus.map((g) => g.gpu_index + ": " + L.fmt(g.utilization_pct, 3) + " %").join(", ") || "-",
  ]), "probes") : L.note("no probes"));
}

function gpuSection(samples) {
  const holder = document.getElementById("gpu-chart");
  if (!samples.length) return holder.replaceChildren(L.note("no GPU samples from the hook"));
  const gpus = [...new Set(samples.map((g) => g.gpu_index))].sort((a, b) => a - b);
  const xs = [...new Set(samples.map((g, i) => (g.step === null ? i : g.step)))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const util = gpus.map(() => xs.map(() => null));
  const power = gpus.map(() => xs.map(() => null));
  const throttled = [];
  samples.forEach((g, i) => {
    const k = gpus.indexOf(g.gpu_index);
    const j = at.get(g.step === null ? i : g.step);
    util[k][j] = g.utilization_pct;
    power[k][j] = g.power_w;
    if (g.throttle) throttled.push(g.step === null ? i : g.step);
  });
  const series = [];
  gpus.forEach((g, i) => series.push({ label: "GPU " + g + " util %", stroke: L.COLORS[i % 8], scale: "%" }));
  gpus.forEach((g, i) => series.push({ label: "GPU " + g + " power W", stroke: L.COLORS[i % 8], dash: [4, 3], scale: "W" }));
  L.chart(holder, "gpu", {
    height: 220, scales: { x: { time: false } }, axes: [{ label: "step" }, { scale: "%", size: 50 }, { scale: "W", side: 1, size: 60 }], series: [{ label: "step" }, ...series],
    hooks: { draw: [(u) => L.vlines(u, throttled, "#d62728", [], true)] },
  }, [xs, ...util, ...power]);
  const reasons = samples.filter((g) => g.throttle).map((g) => g.throttle);
  holder.append(L.note(reasons.length ? "Throttled in " + reasons.length + " samples: " + [...new Set(reasons)].join("; ") : "never throttled"));
}

function whySection(w) {
  const s = L.section("why", "Why: the likely causes");
  if (w.error) return s.append(L.note(w.error));
  s.append(L.el("p", { class: "text" }, w.summary));
  for (const f of w.findings) {
    const ev = L.el("ul", {}, ...f.evidence.map((e) => {
      const where = e.table + (e.id !== undefined ? " #" + e.id : "") + (e.line !== undefined ? (e.table === "step" ? " step " : " line ") + e.line : "");
      const link = e.table === "step" && e.line !== undefined ? L.el("a", { href: "#", class: "goto", "data-step": e.line, text: where })
        : e.table === "log_event" && e.line !== undefined ? L.el("a", { href: "#line-" + e.line, text: where }) : L.el("span", { text: where });
      return L.el("li", {}, link, ": ", L.el("span", { class: "text", text: e.text }));
    }));
    s.append(L.el("div", { class: "finding" }, L.el("p", {}, L.el("b", { text: f.kind }), " (" + f.score.toFixed(2) + "): ", L.el("span", { class: "text", text: f.claim })), ev, L.el("p", { class: "next", text: "Next: " + f.next })));
  }
  for (const n of w.notes || []) s.append(L.note(n));
}

function configSection(c) {
  const s = L.section("config", c.reference ? "Configuration, against " + c.reference : "Configuration");
  if (!c.items.length && !c.only_in_reference.length) return s.append(L.note("no configuration recorded"));
  const rows = c.items.concat(c.only_in_reference).map((i) => [
    i.source, L.cell(i.key, { class: "text" }), L.cell(i.value === null ? "-" : i.value, { class: "text" }), L.cell(i.reference === null ? "-" : i.reference, { class: "text" }), i.differs ? L.cell("differs", { class: "drift" }) : "",
  ]);
  s.append(L.table(["Source", "Key", "Value", "Reference", ""], rows, "config"));
}

const CHARTS = [
  ["throughput", "Throughput per step (band: min–max per pixel), effective, baseline; warm-up shaded, change points purple, stalls red, events orange"],
  ["loss", "Loss"], ["steptime", "Step time and wait"], ["memory", "Memory"], ["ranks", "Throughput per rank"],
  ["gpu", "GPU utilisation, power and throttling"],
];

// Charts first (the server's downsampled read is fast); then the analysis, which marks
// them, and the rest of the page.
async function refresh() {
  if (!document.getElementById("figures")) L.section("figures", "Where it stands").append(L.note("analysing…"));
  for (const [id, title] of CHARTS) {
    if (!document.getElementById(id + "-chart")) chartHolder(id, title).id = id + "-chart";
  }
  const charts = drawSeries(); // at once, beside the rest: the charts are what a reader waits for
  const [detail, decisions, base, found] = await Promise.all([
    L.api("/api/run", { run: RUN }), L.api("/api/run/decisions", { run: RUN }), L.api("/api/baseline"), L.api("/api/run/events", { run: RUN }),
  ]);
  baseline = base.value;
  events = found;
  document.getElementById("title").textContent = "Run " + detail.run;
  document.title = "ledger: " + detail.run;
  await charts;
  analysis = await L.api("/api/run/analysis", { run: RUN });
  figuresSection(analysis, decisions, detail);
  renderSeries();
  gpuSection(await L.api("/api/run/gpu", { run: RUN }));
  eventsSection(events);
  detailSections(detail);
  const w = await L.api("/api/run/why", { run: RUN });
  whySection(w);
  configSection(await L.api("/api/run/config", { run: RUN, against: w.against || "" }));
  L.mark("run");
}

document.addEventListener("click", (e) => {
  const t = e.target.closest("a.goto");
  if (!t) return;
  e.preventDefault();
  const step = Number(t.getAttribute("data-step"));
  zoomTo(step - 50, step + 50);
});

L.poll(refresh);
