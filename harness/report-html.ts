/**
 * One static HTML page from a report. From the top: the closing line; what needs attention (every
 * failing, erroring and vacuous check, then every passing kernel check with a blind spot, each with
 * its message, worst element and replay line); a per-backend summary (availability and the count
 * per status); a legend; then a matrix of rule × variant (rows, those with a non-pass first) by
 * k × backend × dtype (columns, headers wrapped so that the matrix fits 1400 px), each cell coloured
 * by its worst status with the count per status; clicking a cell lists its checks, failing ones open
 * with message, worst error, tolerance and replay command, kernel checks with their detection power
 * and bug signatures; a cell holding a pass with a blind spot is outlined
 * (docs/spec/conformance.md#signatures, #html).
 * Everything is inline (no network, no build step): the report's checks are embedded as JSON and
 * the page renders itself with a few lines of script.
 */
import type { CheckResult } from "./check.ts";
import { closingLine, type Report } from "./report.ts";
import { blindSpotsOf, powerOf } from "./report-power.ts";

/** The matrix coordinates of a check, as the page groups it. */
interface Cell {
  rule: string;
  variant: string;
  k: string;
  backend: string;
  dtype: string;
}

/** Where a check sits in the matrix: its subject's fields, with "—" where a field does not apply. */
export function cellOf(c: CheckResult): Cell {
  const s = c.subject;
  const rule = s.rule ?? (s.op !== undefined ? `op ${s.op}` : s.fixture !== undefined ? "fixture loader" : `${c.class} (no rule)`);
  const base = s.levels ?? (s.frozen === true ? "frozen read" : s.frozen === false ? "update" : "—");
  // the composition pattern (MAC, MAL) is part of the model variant; MAG is the default and unnamed
  const variant = s.pattern !== undefined ? `${s.pattern.toUpperCase()} ${base}` : base;
  return { rule, variant, k: s.k === undefined ? "—" : `k${s.k}`, backend: s.backend ?? "ref", dtype: s.dtype ?? "—" };
}

/** `<` inside an inline script would end it early; JSON escapes keep the text identical once parsed. */
function scriptJson(x: unknown): string {
  return JSON.stringify(x, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v))
    .replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const CSS = `
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; background: #fff; max-width: 1368px; }
h2 { font-size: 15px; margin: 14px 0 4px; }
#attention details { margin: 3px 0; padding: 2px 6px; border-left: 6px solid #ccc; }
#attention details.s-fail, #attention details.s-error { border-left-color: #d33; background: #fff3f3; }
#attention details.s-vacuous { border-left-color: #e90; background: #fff8ec; }
#attention details.blind { border-left-color: #b0f; background: #fbf3ff; }
table.backends { border-collapse: collapse; }
.backends th, .backends td { border: 1px solid #ccc; padding: 1px 8px; text-align: right; }
.backends th.name, .backends td.name, .backends td.reason { text-align: left; }
.backends td.reason { color: #555; max-width: 600px; }
table.legend { border-collapse: collapse; margin: 4px 0 10px; }
.legend td { padding: 1px 8px; border: 1px solid #ddd; }
.legend td.swatch { width: 60px; text-align: center; }
h1 { font-size: 18px; margin: 0 0 4px; }
.meta { color: #555; margin-bottom: 8px; }
.closing { font-family: monospace; font-weight: bold; margin: 8px 0; }
table.matrix { border-collapse: collapse; table-layout: fixed; width: 100%; font-size: 11px; }
.matrix th, .matrix td { border: 1px solid #ccc; padding: 1px 2px; text-align: center; overflow-wrap: anywhere; }
.matrix col.rule { width: 110px; } .matrix col.variant { width: 90px; }
.matrix th.row { text-align: left; }
.matrix td.cell { cursor: pointer; }
.matrix td.cell:hover { outline: 2px solid #333; }
.s-pass { background: #7fd67f; } .s-fail, .s-error { background: #f07070; } .s-vacuous { background: #f5b942; }
.s-skip { background: #cfcfcf; } .empty { background: #fafafa; }
#detail { margin-top: 14px; border-top: 2px solid #333; padding-top: 8px; }
#detail details { margin: 4px 0; padding: 2px 6px; border-left: 6px solid #ccc; }
#detail details.s-fail, #detail details.s-error { border-left-color: #d33; background: #fff3f3; }
#detail details.s-vacuous { border-left-color: #e90; background: #fff8ec; }
#detail details.s-pass { background: #f4fff4; } #detail details.s-skip { background: #f6f6f6; }
pre, code { font-family: monospace; white-space: pre-wrap; word-break: break-all; }
.filters label { margin-right: 10px; }
.matrix td.blind { outline: 3px dashed #b0f; } .blind code { color: #80c; font-weight: bold; }
`;

/** Runs in the page: builds the matrix from the embedded checks and fills the detail panel on click. */
const SCRIPT = `
const data = JSON.parse(document.getElementById("nlc-data").textContent);
const ORDER = ["error", "fail", "vacuous", "pass", "skip"];
const worstOf = (counts) => ORDER.find((s) => counts[s] > 0) || "skip";
const el = (tag, props, ...kids) => { const e = Object.assign(document.createElement(tag), props || {}); for (const k of kids) e.append(k); return e; };
const cmp = (a, b) => a.localeCompare(b, "en", { numeric: true });
const classes = [...new Set(data.checks.map((c) => c.class))].sort(cmp);
const shown = new Set(classes);

function render() {
  const checks = data.checks.filter((c) => shown.has(c.class));
  const rowKey = (c) => c.cell.rule + " | " + c.cell.variant;
  const colKey = (c) => [c.cell.k, c.cell.backend, c.cell.dtype].join(" · ");
  const cols = [...new Set(checks.map(colKey))].sort(cmp);
  const cells = new Map();
  const rowRank = new Map();
  for (const c of checks) {
    const key = rowKey(c) + "\\u0000" + colKey(c);
    if (!cells.has(key)) cells.set(key, []);
    cells.get(key).push(c);
    // a row's rank: its worst status (blind spots count just after the non-passes)
    const rank = c.status === "pass" && c.blind && c.blind.length > 0 ? 2.5 : ORDER.indexOf(c.status);
    rowRank.set(rowKey(c), Math.min(rowRank.get(rowKey(c)) ?? 9, rank));
  }
  const rows = [...rowRank.keys()].sort((a, b) => rowRank.get(a) - rowRank.get(b) || cmp(a, b));
  const colgroup = el("colgroup", {}, el("col", { className: "rule" }), el("col", { className: "variant" }), ...cols.map(() => el("col", {})));
  // a column header on three lines (k, backend, dtype), each allowed to wrap: the matrix keeps to the page width
  const header = (k) => { const th = el("th", { title: k }); k.split(" · ").forEach((part, i) => { if (i > 0) th.append(el("br")); th.append(part); }); return th; };
  const head = el("tr", {}, el("th", { textContent: "rule" }), el("th", { textContent: "variant" }), ...cols.map(header));
  const body = rows.map((r) => {
    const [rule, variant] = r.split(" | ");
    return el("tr", {}, el("th", { className: "row", textContent: rule }), el("th", { className: "row", textContent: variant }), ...cols.map((col) => {
      const list = cells.get(r + "\\u0000" + col);
      if (!list) return el("td", { className: "empty" });
      const counts = {};
      for (const c of list) counts[c.status] = (counts[c.status] || 0) + 1;
      const blind = list.filter((c) => c.status === "pass" && c.blind && c.blind.length > 0).length;
      const td = el("td", { className: "cell s-" + worstOf(counts) + (blind > 0 ? " blind" : ""), title: r + " / " + col,
        textContent: ORDER.filter((s) => counts[s]).map((s) => counts[s] + (s === "pass" ? "" : " " + s)).join(", ") + (blind > 0 ? ", " + blind + " blind spot" + (blind === 1 ? "" : "s") : "") });
      td.dataset.status = worstOf(counts);
      td.addEventListener("click", () => detail(r + " / " + col, list));
      return td;
    }));
  });
  document.getElementById("matrix").replaceChildren(colgroup, el("thead", {}, head), el("tbody", {}, ...body));
  document.body.dataset.scrollWidth = String(document.documentElement.scrollWidth);
}

function detail(title, list) {
  const bad = (s) => s === "fail" || s === "error" || s === "vacuous";
  const sorted = [...list].sort((a, b) => ORDER.indexOf(a.status) - ORDER.indexOf(b.status) || cmp(a.id, b.id));
  const items = sorted.map((c) => {
    const d = el("details", { className: "s-" + c.status, open: bad(c.status) }, el("summary", { textContent: c.status + "  " + c.id }));
    if (c.message) d.append(el("div", {}, el("b", { textContent: "message: " }), el("code", { textContent: c.message })));
    if (c.worst) d.append(el("div", {}, el("b", { textContent: "worst: " }),
      el("code", { textContent: c.worst.tensor + (c.worst.at ? " at " + c.worst.at : "[" + c.worst.index + "]") + "  abs " + c.worst.abs + "  rel " + c.worst.rel })));
    d.append(el("div", {}, el("b", { textContent: "tolerance: " }), el("code", { textContent: JSON.stringify(c.tolerance) })));
    if (c.power) d.append(el("div", {}, el("b", { textContent: "power: " }), el("code", { className: "power",
      textContent: (c.power.power === null ? "none" : c.power.power) + " (" + c.power.tensor + ", " + c.power.by + ")" +
        (c.power.gradient ? "; weakest gradient " + (c.power.gradient.power === null ? "none" : c.power.gradient.power) + " (" + c.power.gradient.tensor + ")" : "") })));
    if (c.signatures) d.append(el("div", {}, el("b", { textContent: "signatures: " }), el("code", { className: "signatures",
      textContent: Object.entries(c.signatures).map(([s, v]) => s + " " + (v.status === "detected" && v.eps !== undefined ? "ε=" + v.eps : v.status)).join(", ") })));
    for (const b of c.blind || []) d.append(el("div", { className: "blind" }, el("b", { textContent: "blind spot: " }), el("code", { textContent: b })));
    if (bad(c.status)) d.append(el("div", {}, el("b", { textContent: "replay: " }), el("code", { className: "replay", textContent: c.replay })));
    d.append(el("div", {}, el("b", { textContent: "spec: " }), el("code", { textContent: c.spec })));
    return d;
  });
  document.getElementById("detail").replaceChildren(el("h2", { textContent: title }), ...items);
}

const filters = document.getElementById("filters");
for (const cls of classes) {
  const box = el("input", { type: "checkbox", checked: true });
  box.addEventListener("change", () => { box.checked ? shown.add(cls) : shown.delete(cls); render(); });
  filters.append(el("label", {}, box, " " + cls));
}
render();
const firstBad = [...document.querySelectorAll("td.cell")].find((td) => ["error", "fail", "vacuous"].includes(td.dataset.status));
if (firstBad) firstBad.click();
`;

const RANK: Readonly<Record<string, number>> = { error: 0, fail: 1, vacuous: 2, pass: 3, skip: 4 };

/** The worst element as the page shows it: `dk[seq 0] at (b=0, t=3, h=1, i=2)`, or the flat index. */
function worstText(w: NonNullable<CheckResult["worst"]>): string {
  return `${w.tensor}${w.at !== undefined ? ` at ${w.at}` : `[${w.index}]`}  abs ${w.abs}  rel ${w.rel}`;
}

/** Failures (error, fail, vacuous) then passes with a blind spot: one entry each, open, with what to act on. */
function attentionSection(checks: readonly CheckResult[]): string {
  const bad = checks.filter((c) => c.status === "error" || c.status === "fail" || c.status === "vacuous")
    .sort((a, b) => RANK[a.status]! - RANK[b.status]! || a.id.localeCompare(b.id, "en", { numeric: true }));
  const blind = checks.filter((c) => c.status === "pass" && blindSpotsOf(c).length > 0);
  if (bad.length + blind.length === 0) return `<section id="attention"><h2>Needs attention</h2><p>nothing: no check failed, errored or was vacuous, and no passing kernel check has a blind spot</p></section>`;
  const line = (label: string, text: string, cls = "") => `<div><b>${label}: </b><code${cls ? ` class="${cls}"` : ""}>${escapeHtml(text)}</code></div>`;
  const entry = (c: CheckResult, isBlind: boolean) => `<details open class="${isBlind ? "blind" : `s-${c.status}`}"><summary>${escapeHtml(`${isBlind ? "blind spot" : c.status}  ${c.id}`)}</summary>` +
    (isBlind ? blindSpotsOf(c).map((b) => line("blind spot", b)).join("") : (c.message ? line("message", c.message) : "")) +
    (c.worst ? line("worst", worstText(c.worst)) : "") + line("replay", c.replay, "replay") + `</details>`;
  return `<section id="attention"><h2>Needs attention: ${bad.length} failing, erroring or vacuous, ${blind.length} passing with a blind spot</h2>` +
    bad.map((c) => entry(c, false)).join("") + blind.map((c) => entry(c, true)).join("") + `</section>`;
}

/** Per backend (the matrix's backend coordinate): whether it was available, and its checks by status. */
function backendSection(report: Report): string {
  const statuses = ["pass", "fail", "error", "vacuous", "skip"] as const;
  const by = new Map<string, Record<string, number>>();
  for (const c of report.checks) {
    const b = cellOf(c).backend, counts = by.get(b) ?? { blind: 0 };
    counts[c.status] = (counts[c.status] ?? 0) + 1;
    if (c.status === "pass" && blindSpotsOf(c).length > 0) counts.blind!++;
    by.set(b, counts);
  }
  const info = new Map(report.run.backends.map((b) => [b.name, b]));
  const names = [...new Set([...by.keys(), ...info.keys()])].sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  const rows = names.map((n) => {
    const counts = by.get(n) ?? {}, b = info.get(n);
    const state = b === undefined ? "" : b.available ? "available" : "unavailable";
    return `<tr><td class="name">${escapeHtml(n)}</td><td class="name">${state}</td>${statuses.map((s) => `<td class="${counts[s] ? `s-${s}` : ""}">${counts[s] ?? 0}</td>`).join("")}` +
      `<td>${counts.blind ?? 0}</td><td class="reason">${escapeHtml(b?.available === false ? (b.reason ?? "") : "")}</td></tr>`;
  });
  return `<section id="backends"><h2>Backends</h2><table class="backends"><thead><tr><th class="name">backend</th><th class="name">state</th>` +
    `${statuses.map((s) => `<th>${s}</th>`).join("")}<th>blind spots</th><th class="name">reason</th></tr></thead><tbody>${rows.join("")}</tbody></table></section>`;
}

const LEGEND = `<table class="legend" id="legend"><tbody>
<tr><td class="swatch s-pass">pass</td><td>every check in the cell passed</td></tr>
<tr><td class="swatch s-fail">fail</td><td>a check failed (the kernel or reference is wrong) or errored (it could not run: a crash, a timeout, a load error)</td></tr>
<tr><td class="swatch s-vacuous">vacuous</td><td>a check that could not have failed: it compared only near-zero values (docs/spec/tolerances.md#vacuous); never a pass</td></tr>
<tr><td class="swatch s-skip">skip</td><td>not run, with the reason in the check (no GPU, no PyTorch, a rule the kernel does not declare); never a pass</td></tr>
<tr><td class="swatch s-pass blind">pass</td><td>dashed outline: a pass with a blind spot, a bug signature its comparison did not detect (docs/spec/conformance.md#signatures)</td></tr>
<tr><td class="swatch empty"></td><td>no check at these coordinates</td></tr>
<tr><td class="swatch">3, 1 fail</td><td>the checks of the cell by status (a bare number: passes); rows: rule × variant, those with a non-pass first; columns: k · backend · dtype; click a cell for its checks</td></tr>
</tbody></table>`;

export function reportHtml(report: Report, source: string): string {
  const checks = report.checks.map((c) => ({
    id: c.id, class: c.class, status: c.status, cell: cellOf(c), message: c.message, worst: c.worst,
    tolerance: c.tolerance, replay: c.replay, spec: c.spec,
    ...(powerOf(c) !== undefined ? { power: powerOf(c) } : {}),
    ...(c.details?.signatures !== undefined ? { signatures: c.details.signatures } : {}),
    ...(blindSpotsOf(c).length > 0 ? { blind: blindSpotsOf(c) } : {}),
  }));
  const ps = report.summary.power;
  const powerLine = ps === undefined ? "" : `<div class="power-summary">detection power of ${ps.checks} kernel checks (docs/spec/precision.md#power): weakest ` +
    `${escapeHtml(String(ps.weakest?.power ?? "none"))} (${escapeHtml(ps.weakest?.id ?? "")}, ${escapeHtml(ps.weakest?.tensor ?? "")}), median ${escapeHtml(String(ps.median ?? "none"))}` +
    `; ${ps.blind_spots} passing check${ps.blind_spots === 1 ? "" : "s"} with a blind spot (docs/spec/conformance.md#signatures)</div>`;
  const r = report.run;
  const meta = `${source} · ${r.started} · version ${r.version}${r.revision ? ` (${r.revision.slice(0, 10)})` : ""} · seed ${r.seed} · profile ${r.profile}` +
    `${r.filter ? ` · filter ${r.filter}` : ""} · ${r.runtime} · ${r.os} · ${r.cpu}` +
    ` · backends: ${r.backends.map((b) => `${b.name} ${b.available ? "available" : "unavailable"}`).join(", ")}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>nl-conformance report</title>
<style>${CSS}</style>
</head>
<body>
<h1>nl-conformance report</h1>
<div class="meta">${escapeHtml(meta)}</div>
<div class="closing">${escapeHtml(closingLine(report.summary))}</div>
${powerLine}
${attentionSection(report.checks)}
${backendSection(report)}
<h2>Matrix</h2>
${LEGEND}
<div class="filters" id="filters">classes: </div>
<table class="matrix" id="matrix"></table>
<div id="detail"></div>
<script type="application/json" id="nlc-data">${scriptJson({ checks })}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
