// The investigation page: the baseline, the attempts in the order they ran, the marathon.
"use strict";

function verdictText(a) {
  if (a.is_reference) return "reference";
  if (!a.analysed) return "-";
  return a.verdict || "-";
}

function attemptRow(a) {
  const hypothesis = a.hypothesis ? "#" + a.hypothesis.id + " " + a.hypothesis.text + " (" + a.hypothesis.status + ")" : "-";
  const drift = a.drift === true ? "DRIFT" : a.drift === false ? "no drift" : "-";
  return [
    L.cell(L.runLink(a.run), { class: "name" }),
    L.cell(a.fate, { class: "fate fate-" + a.fate, title: a.fate_reason || null }),
    L.cell(a.launches === null ? "-" : String(a.launches)),
    L.cell(a.steps.toLocaleString("en-US"), { class: "num" }),
    L.cell(a.analysed ? a.effective_text : a.why_not_analysed || "-", {
      class: "num effective", "data-value": a.analysed ? a.judged_effective : null,
    }),
    L.cell(a.analysed ? a.ci_text : "-", { class: "num ci" }),
    L.cell(a.analysed ? a.vs_baseline_text : "-", { class: "num of-baseline", "data-value": a.vs_baseline_pct }),
    L.cell(verdictText(a), { class: "verdict verdict-" + verdictText(a), title: a.verdict_summary || null }),
    L.cell(drift, { class: a.drift ? "drift" : null }),
    L.cell(hypothesis, { class: "text" }),
    L.cell(a.patch || "-", { class: "text" }),
  ];
}

function marathon(holder, data) {
  const shown = data.attempts.filter((a) => a.analysed);
  const xs = shown.map((_, i) => i);
  const eff = shown.map((a) => a.judged_effective);
  const base = shown.map(() => data.baseline.value);
  const names = shown.map((a) => a.run);
  const options = {
    height: 260,
    scales: { x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] } },
    axes: [
      { values: (u, splits) => splits.map((i) => (Number.isInteger(i) && names[i] !== undefined ? names[i].slice(0, 18) : "")), incrs: [1], rotate: 0 },
      { label: data.unit || "throughput", size: 70 },
    ],
    series: [
      { label: "attempt" },
      { label: "effective", stroke: "#1f77b4", paths: () => null, points: { show: true, size: 9, fill: "#1f77b4" } },
      { label: "baseline", stroke: "#888", dash: [6, 4], points: { show: false } },
    ],
    hooks: {
      draw: [
        (u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#1f77b4";
          ctx.lineWidth = 2 * devicePixelRatio;
          shown.forEach((a, i) => {
            if (!a.judged_effective_ci95) return;
            const x = u.valToPos(i, "x", true);
            const y0 = u.valToPos(a.judged_effective_ci95[0], "y", true);
            const y1 = u.valToPos(a.judged_effective_ci95[1], "y", true);
            ctx.beginPath();
            ctx.moveTo(x, y0);
            ctx.lineTo(x, y1);
            ctx.moveTo(x - 5, y0);
            ctx.lineTo(x + 5, y0);
            ctx.moveTo(x - 5, y1);
            ctx.lineTo(x + 5, y1);
            ctx.stroke();
          });
          ctx.restore();
        },
      ],
    },
  };
  if (!shown.length) {
    holder.replaceChildren(L.note("no attempt has enough steps to analyse yet"));
    return;
  }
  L.chart(holder, "marathon", options, [xs, eff, base]);
}

// A new run shows at once by its name; its figures follow when the analysis is done.
async function newNames() {
  const table = document.querySelector("table.attempts tbody");
  if (!table) return;
  const shown = new Set(Array.from(table.querySelectorAll("td.name")).map((td) => td.textContent));
  for (const name of await L.api("/api/run-names")) {
    if (shown.has(name)) continue;
    table.append(L.el("tr", { class: "pending" }, L.cell(L.runLink(name), { class: "name" }), L.el("td", { colspan: 10, class: "note", text: "new: analysing…" })));
  }
}

async function refresh() {
  const data = await L.api("/api/investigation");
  document.getElementById("title").textContent = "Investigation " + data.investigation;
  const head = L.section("summary", "Baseline");
  head.append(
    L.el("p", {},
      data.baseline.value === null
        ? "No baseline yet (ledger baseline set 14200 --unit tok/s)."
        : "Baseline " + data.baseline_text + " " + (data.baseline.unit || "") + ".",
      " ", data.reference ? "Verdicts are against the first analysed attempt, " : "",
      data.reference ? L.runLink(data.reference) : "", data.reference ? "." : ""
    )
  );
  document.getElementById("title").title = "ledger: " + data.db;
  const chart = L.section("marathon", "The marathon: effective throughput of each attempt (95 % interval), baseline dashed");
  const holder = L.el("div", { class: "chart" });
  chart.append(holder);
  const rows = L.section("attempts", "Attempts, in the order they ran");
  rows.append(
    L.table(
      ["Run", "Fate", "Launches", "Steps", "Effective " + (data.unit || ""), "95% CI", "Of baseline", "Verdict", "Drift", "Hypothesis", "Patch"],
      data.attempts.map(attemptRow),
      "attempts"
    )
  );
  marathon(holder, data);
  window.ledgerServe.points.attempts = data.attempts.length;
  L.mark("investigation");
}

L.poll(refresh, newNames);
