// The compare page: pick runs (?runs=a,b), overlay their throughput, and the verdicts
// in the words `ledger compare` prints.
"use strict";

let chosen = (L.params().get("runs") || "").split(",").filter((n) => n);

function picker(runs) {
  const s = L.section("pick", "Runs (the first is the reference)");
  const list = L.el("div", { class: "picker" });
  for (const r of runs) {
    const box = L.el("input", { type: "checkbox", value: r.run, "data-run": r.run });
    box.checked = chosen.includes(r.run);
    box.addEventListener("change", () => {
      chosen = box.checked ? chosen.concat([r.run]) : chosen.filter((n) => n !== r.run);
      L.setParams({ runs: chosen.join(",") });
      draw();
    });
    list.append(L.el("label", {}, box, " ", r.run, " (" + r.fate + ", " + r.steps.toLocaleString("en-US") + " steps)"));
  }
  s.append(list);
}

async function overlay(holder, names) {
  const width = Math.max(300, holder.clientWidth || 900);
  const all = await Promise.all(names.map((n) => L.api("/api/run/series", { run: n, width: width })));
  const xs = [...new Set(all.flatMap((s) => s.steps))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  const series = [{ label: "step" }];
  all.forEach((s, i) => {
    const y = xs.map(() => null);
    const low = s.columns.throughput ? s.columns.throughput.low : [];
    s.steps.forEach((x, j) => (y[at.get(x)] = low[j]));
    data.push(y);
    series.push({ label: names[i], stroke: L.COLORS[i % 8], spanGaps: true });
  });
  window.ledgerServe.points.overlay = { width: width, points: xs.length };
  L.chart(holder, "overlay", { height: 300, scales: { x: { time: false } }, axes: [{ label: "step" }, { size: 70 }], series: series }, data);
}

async function draw() {
  const main = L.section("result", "Verdict");
  if (!chosen.length) {
    main.append(L.note("Tick two runs or more."));
    L.mark("compare");
    return;
  }
  const c = await L.api("/api/compare", { runs: chosen.join(",") });
  const r = c.report;
  const unit = (r.runs.find((x) => x.unit) || {}).unit || r.baseline.unit || "";
  main.append(L.el("ul", { class: "sentences" }, ...c.sentences.map((s) => L.el("li", { class: "sentence verdict-" + s.verdict, text: s.sentence })), ...c.baseline_sentences.map((t) => L.el("li", { class: "sentence", text: t }))));
  for (const note of r.notes) main.append(L.note("warning: " + note, "warning"));
  main.append(L.table(["Run", "Fate", "Steady from", "Steps", "Effective " + unit, "95% CI", "Median", "Of baseline"], r.runs.map((x) => {
    const f = c.figures[x.run];
    return [L.cell(L.runLink(x.run)), r.fates[x.run] || "-", x.steady_from_step.toLocaleString("en-US"), x.n_steady.toLocaleString("en-US"),
      L.cell(f.effective_text, { class: "num effective", "data-value": f.judged_effective }), L.cell(f.ci_text, { class: "num ci" }), L.cell(f.median_text, { class: "num" }),
      L.cell(f.vs_baseline_text, { class: "num of-baseline", "data-value": f.vs_baseline_pct })];
  }), "compared"));
  main.append(L.table(["A", "B", "Effective Δ", "95% CI of Δ", "p", "Verdict"], r.comparisons.map((x, i) => [
    x.a, x.b, L.cell(L.fmt(x.delta_pct, 4) + " %", { class: "num delta", "data-value": x.delta_pct }),
    L.cell(x.ci95_pct ? L.fmt(x.ci95_pct[0], 4) + " to " + L.fmt(x.ci95_pct[1], 4) + " %" : "-", { class: "num", "data-low": x.ci95_pct ? x.ci95_pct[0] : null, "data-high": x.ci95_pct ? x.ci95_pct[1] : null }),
    L.cell(c.sentences[i].p_text, { class: "num p", "data-value": x.p_value }), L.cell(x.verdict, { class: "verdict verdict-" + x.verdict }),
  ]), "pairs"));
  const holder = L.el("div", { class: "chart" });
  L.section("overlay", "Throughput, overlaid (the lowest step of each pixel, so no stall is smoothed away)").append(holder);
  await overlay(holder, chosen);
  L.mark("compare");
}

async function refresh() {
  picker(await L.api("/api/runs"));
  await draw();
}

L.poll(refresh);
