/**
 * The HTML report: a self-contained page (no network, inline script and style), and, where Debian's
 * chromium is installed (.ci/run installs it), rendered in a real headless browser: the matrix
 * exists with a failing cell, the click-through lists the failing check's message, worst value,
 * tolerance and replay line, and a screenshot of the page is non-empty and not blank.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cellOf, reportHtml } from "../harness/report-html.ts";
import { pngColourCount } from "./png-colours.ts";
import { check, report } from "./synthetic-report.ts";

const HOSTILE = "dW[0]: got </script><b>1</b> & more";
const REPORT = report([
  check("C2/moneta", "pass", { subject: { rule: "moneta", frozen: false, dtype: "f64" }, ratio: 0.1 }),
  check("C2/moneta.frozen", "fail", { subject: { rule: "moneta", frozen: true, dtype: "f64" }, ratio: 3000, message: HOSTILE }),
  check("C3/moneta/k2/frozen-1", "pass", { subject: { rule: "moneta", k: 2, levels: "frozen-1", dtype: "f64" } }),
  check("C5/cpu-emu/moneta/forward", "skip", { subject: { rule: "moneta", frozen: false, backend: "cpu-emu", phase: "forward", dtype: "f32" }, message: "no toolchain" }),
  check("C9/moneta", "vacuous", { subject: { rule: "moneta", frozen: false, dtype: "f64" }, message: "every compared tensor was zero" }),
]);

test("matrix coordinates come from the subject fields", () => {
  expect(cellOf(REPORT.checks[2]!)).toEqual({ rule: "moneta", variant: "frozen-1", k: "k2", backend: "ref", dtype: "f64" });
  expect(cellOf(REPORT.checks[1]!)).toMatchObject({ variant: "frozen read", k: "—" });
  expect(cellOf(REPORT.checks[3]!)).toMatchObject({ backend: "cpu-emu", dtype: "f32" });
});

test("the page is one self-contained file: no external resource, the data survives hostile text", () => {
  const page = reportHtml(REPORT, "synthetic.json");
  expect(page).not.toMatch(/\b(src|href)=/);
  expect(page).not.toMatch(/https?:\/\/(?!www\.w3)/);
  expect(page.match(/<\/script>/g)!.length).toBe(2);
  const json = /<script type="application\/json" id="nlc-data">([^]*?)<\/script>/.exec(page)![1]!;
  expect(JSON.parse(json).checks[1].message).toBe(HOSTILE);
});

/** Debian's chromium (the `chromium` package); NLC_CHROMIUM names another binary. */
function findChromium(): string | null {
  const named = process.env.NLC_CHROMIUM;
  if (named) return named;
  for (const p of ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) if (existsSync(p)) return p;
  return null;
}
const chromium = findChromium();
const why = "chromium is not installed (apt-get install chromium; .ci/run does it), so the page is not rendered in a browser";
if (chromium === null) console.warn(`report-html: skipped: ${why}`);

function headless(...args: string[]): string {
  const r = Bun.spawnSync({
    cmd: [chromium!, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", ...args],
    stdout: "pipe", stderr: "pipe", timeout: 60_000,
  });
  if (r.exitCode !== 0) throw new Error(`chromium exited ${r.exitCode}: ${r.stderr.toString().slice(-600)}`);
  return r.stdout.toString();
}

test.skipIf(chromium === null)(`in headless chromium: the matrix renders, a click lists the failure, the screenshot is not blank${chromium === null ? ` (skip: ${why})` : ""}`, () => {
  // A synthetic report's page goes under a temporary folder, never beside the real reports.
  const dir = mkdtempSync(join(tmpdir(), "nlc-html-"));
  const page = join(dir, "conformance-matrix.html");
  writeFileSync(page, reportHtml(REPORT, "synthetic.json"));
  const url = `file://${page}`;

  const dom = headless("--dump-dom", url);
  const cells = [...dom.matchAll(/<td class="cell s-(\w+)"[^>]*>([^<]*)<\/td>/g)].map((m) => [m[1], m[2]]);
  // rows: moneta | frozen read, frozen-1, update; the update row has a pass, a vacuous (C9) and a skip (C5, cpu-emu column).
  expect(cells).toContainEqual(["fail", "1 fail"]);
  expect(cells).toContainEqual(["vacuous", "1 vacuous, 1"]);
  expect(cells).toContainEqual(["skip", "1 skip"]);
  expect(cells.length).toBe(4);
  // The page opens the first failing cell: its check, message, worst value, tolerance and replay line.
  const detail = dom.slice(dom.indexOf('id="detail"'));
  expect(detail).toContain("C2/moneta.frozen");
  expect(detail).toContain("dW[0]: got &lt;/script&gt;&lt;b&gt;1&lt;/b&gt; &amp; more");
  expect(detail).toContain("dW[0]  abs 0.003");
  expect(detail).toContain('{"rtol":0,"atol":0.000001}');
  expect(detail).toContain("npm run conformance -- --replay C2/moneta.frozen:7:3:1");

  const shot = join(dir, "conformance-matrix.png");
  rmSync(shot, { force: true });
  headless(`--screenshot=${shot}`, "--window-size=1200,800", url);
  expect(statSync(shot).size).toBeGreaterThan(1000);
  expect(pngColourCount(readFileSync(shot))).toBeGreaterThan(4);
  console.log(`report-html: screenshot ${shot}`);
}, 120_000);

/**
 * A report shaped like the default run's (issue 35 item 10): every rule, both variants, the native
 * and py: backends in three dtypes and k1..k4: ~30 columns, ~100 rows, one failure deep in the
 * matrix, one vacuous check, one pass with a blind spot.
 */
function wideReport() {
  const rules = ["delta", "gated_delta", "hebbian", "titans", "atlas", "moneta", "yaad", "memora", "lattice", "trellis", "swa"];
  const checks = [];
  for (const rule of rules) {
    for (const frozen of [false, true]) {
      const v = frozen ? `${rule}.frozen` : rule;
      for (const backend of ["cpu-emu", "cuda", "cpu-f32", "cuda-f32", "cpu-bf16", "cuda-bf16", "py:examples/py-kernels/fla_deltanet.py:chunk_gated_delta_rule_bf16"]) {
        const dtype = backend.includes("bf16") ? "f64+f32" as const : "f32" as const;
        const status = backend.startsWith("cuda") ? "skip" : rule === "trellis" && frozen && backend === "cpu-f32" ? "fail" : "pass";
        checks.push(check(`C5/${backend}/${v}/forward`, status, { subject: { rule, frozen, backend, phase: "forward", dtype },
          ...(status === "skip" ? { message: "no GPU" } : {}),
          ...(rule === "lattice" && !frozen && backend === "cpu-emu" ? { details: { blind_spots: ["dv: sign-flip not detected"] } } : {}) }));
      }
      for (const k of [1, 2, 3, 4]) checks.push(check(`C3/${v}/k${k}`, rule === "yaad" && k === 3 && !frozen ? "vacuous" : "pass", { subject: { rule, frozen, k, dtype: "f64" }, ...(rule === "yaad" && k === 3 ? { message: "never exercised: y" } : {}) }));
      for (const dtype of ["f64", "f32", "f64+f32"] as const) checks.push(check(`C2/${v}/${dtype}`, "pass", { subject: { rule, frozen, dtype } }));
    }
  }
  for (let i = 0; i < 60; i++) checks.push(check(`C0/op${i}`, "pass", { subject: { op: `op${i}`, dtype: "f64" } }));
  return report(checks, { backends: [{ name: "ref", available: true }, { name: "cpu-emu", available: true }, { name: "cuda", available: false, reason: "no GPU (nvidia-smi not found)" }] });
}

test("failures and blind spots come first, then a per-backend summary and a legend", () => {
  const page = reportHtml(wideReport(), "wide.json");
  const at = (s: string) => page.indexOf(s);
  expect(at('id="attention"')).toBeGreaterThan(0);
  expect(at('id="attention"')).toBeLessThan(at('id="backends"'));
  expect(at('id="backends"')).toBeLessThan(at('id="legend"'));
  expect(at('id="legend"')).toBeLessThan(at('id="matrix"'));
  const attention = page.slice(at('id="attention"'), at('id="backends"'));
  expect(attention).toContain("Needs attention: 2 failing, erroring or vacuous, 1 passing with a blind spot");
  // fail before vacuous before the blind spot, each with its replay line
  expect(attention.indexOf("fail  C5/cpu-f32/trellis.frozen/forward")).toBeLessThan(attention.indexOf("vacuous  C3/yaad/k3"));
  expect(attention.indexOf("vacuous  C3/yaad/k3")).toBeLessThan(attention.indexOf("blind spot  C5/cpu-emu/lattice/forward"));
  expect(attention).toContain("npm run conformance -- --replay C5/cpu-f32/trellis.frozen/forward:7:3:1");
  const backends = page.slice(at('id="backends"'), at('id="legend"'));
  expect(backends).toMatch(/<td class="name">cuda<\/td><td class="name">unavailable<\/td><td class="">0<\/td><td class="">0<\/td><td class="">0<\/td><td class="">0<\/td><td class="s-skip">22<\/td><td>0<\/td><td class="reason">no GPU \(nvidia-smi not found\)<\/td>/);
  expect(backends).toMatch(/<td class="name">cpu-f32<\/td><td class="name"><\/td><td class="s-pass">21<\/td><td class="s-fail">1<\/td>/);
  for (const s of ["pass", "fail", "vacuous", "skip", "blind spot", "no check"]) expect(page.slice(at('id="legend"'), at('id="matrix"'))).toContain(s);
});

test.skipIf(chromium === null)(`in headless chromium at 1400 px: the wide matrix fits without scrolling sideways, its failing rows first${chromium === null ? ` (skip: ${why})` : ""}`, () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-html-"));
  const page = join(dir, "wide.html");
  writeFileSync(page, reportHtml(wideReport(), "wide.json"));
  const dom = headless("--window-size=1400,900", "--dump-dom", `file://${page}`);
  const width = Number(/data-scroll-width="(\d+)"/.exec(dom)![1]);
  console.log(`report-html: the wide matrix at 1400 px: scroll width ${width} px`);
  expect(width).toBeGreaterThan(1000);
  expect(width).toBeLessThanOrEqual(1400);
  const rows = [...dom.matchAll(/<tr><th class="row">([^<]*)<\/th><th class="row">([^<]*)<\/th>/g)].map((m) => `${m[1]} | ${m[2]}`);
  expect(rows.length).toBeGreaterThan(80);
  expect(rows.slice(0, 3), rows.slice(0, 5).join("; ")).toEqual(["trellis | frozen read", "yaad | update", "lattice | update"]);
}, 120_000);
