#!/usr/bin/env bun
/**
 * Cross-implementation check (README D19, class C9 in the making): every rule and frozen
 * variant, SWA, and MAG + CMS model cases, built with the TypeScript reference's own case
 * builders, run through the TypeScript reference (hand-written backward) and through the
 * independent PyTorch implementation (python/nlc_torch, autograd), both in f64. Prints, per case,
 * the worst relative difference max|torch − ts| / max|ts| of y, the final state, every gradient,
 * the loss and the error buffers (max|ts| floored at 1e-3 of the largest tensor of the same
 * group in the case, so that exactly-cancelling gradients compare their rounding to a scale).
 *
 *   ./node_modules/.bin/bun conformance/c9/cross-check.ts [--cases N] [--seed S] [--large] [--extreme] [--rule KEY]...
 *       [--no-rules] [--no-model] [--no-fixtures] [--verbose] [--tol X] [--json PATH] [--select FILE] [--golden DIR]
 *
 * --select FILE ({"rules": [variant keys], "model": [case ids], "fixtures": bool}) runs only those
 * (a suite run passes what it selected); each case is the one a whole run draws.
 *
 * Exit code 1 when any compared tensor differs by more than --tol (default 1e-10) or a rule variant
 * or model case could not be run (a rule the bridge does not list, or one it fails on: that row
 * alone errors, with a message naming the rule, and the run goes on), 2 when the bridge is
 * unavailable.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { RuleCaseSpec } from "../../cases/rule-case.ts";
import { RULES, ruleByKey } from "../../src/rules/index.ts";
import { TorchBridge, TorchBridgeError } from "../../oracle/torch-bridge.ts";
import { allowance, fmt, worst, type Diff } from "./compare.ts";
import { EDGES, FD_ATOL, FD_RTOL, ruleSpecs, runRuleCase, type RuleCaseResult, type StateFd } from "./rule-cases.ts";
import { modelCases, runModelCase, type ModelCaseDef } from "./model-cases.ts";
import { replayFixture } from "./golden-fixtures.ts";
import type { Options, Selection } from "./options.ts";
import { environment } from "../../environment.ts";
export type { Options } from "./options.ts";

export { modelCases } from "./model-cases.ts";

// ── options ─────────────────────────────────────────────────────────────────────────────────


export function parseArgs(argv: string[]): Options {
  const o: Options = { cases: 6, seed: 1, large: false, extreme: false, rules: [], doRules: true, doModel: true, doFixtures: true, verbose: false, tol: 1e-10, json: null, select: null, golden: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--cases") o.cases = Number(val());
    else if (a === "--seed") o.seed = Number(val());
    else if (a === "--large") o.large = true;
    else if (a === "--extreme") o.extreme = true;
    else if (a === "--rule") o.rules.push(...val().split(","));
    else if (a === "--no-rules") o.doRules = false;
    else if (a === "--no-model") o.doModel = false;
    else if (a === "--no-fixtures") o.doFixtures = false;
    else if (a === "--verbose") o.verbose = true;
    else if (a === "--tol") o.tol = Number(val());
    else if (a === "--json") o.json = val();
    else if (a === "--golden") o.golden = val();
    else if (a === "--select") o.select = JSON.parse(readFileSync(val(), "utf8")) as Selection;
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

// ── main ────────────────────────────────────────────────────────────────────────────────────

/**
 * A rule variant the torch side does not know (its hello lists what it has forwards for) or fails
 * on errors that variant's results only: the rest of the run goes on (docs/spec/conformance.md#c9).
 */
export function unknownRuleMessage(keys: readonly string[]): string {
  return `the PyTorch reference has no forward of rule ${keys.map((k) => `'${k}'`).join(", ")} (its bridge does not list it): ` +
    `add it to python/nlc_torch/rules.py (docs/contributing.md "Adding a rule")`;
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The rule variants a model case runs on the torch side: each level's rule and, where it has one, its frozen read. */
function modelCaseRules(def: ModelCaseDef): string[] {
  const keys = new Set<string>();
  for (const lv of def.spec.levels) {
    keys.add(lv.rule);
    if (ruleByKey(lv.rule).frozen !== null) keys.add(`${lv.rule}.frozen`);
  }
  return [...keys];
}

function group(ds: readonly Diff[], prefix: string, tol: number): Diff | null {
  return worst(ds.filter((d) => d.name.startsWith(prefix)), tol);
}

const spreadNote = (d: Diff, tol: number) => (d.spread === undefined ? "" : ` (order spread ${fmt(d.spread)}: allowed ${fmt(allowance(d, tol))})`);

function cell(d: Diff | null, withName = false): string {
  if (d === null) return "-";
  const short = d.name.replace(/^grads\.(levels\.)?|^state\.|^error_buffers\.|^context\./, "");
  return withName ? `${fmt(d.rel)} (${short})` : fmt(d.rel);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

interface RuleAgg { y: Diff[]; st: Diff[]; gr: Diff[]; fd: StateFd[]; ms: number[]; rt: number[]; n: number; vac: number; ill: string[] }

/** Worst |torch − FD| / max(|FD|, atol/rtol) over the cases, and how many were within the FD tolerance. */
function fdCell(fds: readonly StateFd[]): string {
  if (fds.length === 0) return "-";
  let w = 0;
  for (const f of fds) w = Math.max(w, Math.abs(f.an - f.fd) / Math.max(Math.abs(f.fd), FD_ATOL / FD_RTOL));
  return `${fmt(w)} ${fds.filter((f) => f.ok).length}/${fds.length}`;
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  // No separate probe: the bridge's own start says whether python and torch are there (a probe
  // started Python and imported torch once more, on the run's longest lane).
  let br: TorchBridge;
  try {
    // One torch thread unless NLC_TORCH_THREADS says otherwise: C9's tensors are tiny (d <= 12), and
    // beside the run's other lanes a thread pool only contends (5.2 s against 6.1 s for the quick
    // cases on two busy cores; docs/spec/conformance.md#speed).
    br = await TorchBridge.start(environment().NLC_TORCH_THREADS === undefined ? { threads: 1 } : {});
  } catch (e) {
    if (e instanceof TorchBridgeError && e.kind === "unavailable") {
      console.error(`cross-check: the torch bridge is not available: ${e.message}`);
      return 2;
    }
    throw e;
  }
  console.log(`torch ${br.info.torch} (python ${br.info.python}); bridge startup ${br.startupMs.toFixed(0)} ms; ` +
    `protocol ${br.info.protocol}; tolerance ${o.tol}`);
  let failures = 0;
  const report: Record<string, unknown> = { torch: br.info.torch, startupMs: br.startupMs, tol: o.tol };
  const known = new Set(br.info.rules);
  /** Rule variant → why it could not be compared. */
  const errors = new Map<string, string>();
  const ruleError = (key: string, message: string) => {
    if (errors.has(key)) return;
    errors.set(key, message);
    failures++;
    console.log(`${key.padEnd(15)} ERROR: ${message}`);
  };

  if (o.doRules && (o.select === null || o.select.rules.length > 0)) {
    console.log("\n== rule cases: max|torch − ts| / max|ts| ==");
    const perRule: Record<string, RuleAgg> = {};
    const all: RuleCaseResult[] = [];
    const edgeRows: string[] = [];
    for (const decl of RULES) {
      for (const frozen of decl.frozen === null ? [false] : [false, true]) {
        const key = frozen ? `${decl.key}.frozen` : decl.key;
        if (o.rules.length > 0 && !o.rules.includes(key) && !o.rules.includes(decl.key)) continue;
        if (o.select !== null && !o.select.rules.includes(key)) continue;
        const agg: RuleAgg = { y: [], st: [], gr: [], fd: [], ms: [], rt: [], n: 0, vac: 0, ill: [] };
        perRule[key] = agg;
        if (!known.has(key)) {
          ruleError(key, unknownRuleMessage([key]));
          continue;
        }
        for (const spec of ruleSpecs(decl, o, frozen)) {
          let r: RuleCaseResult;
          try {
            r = await runRuleCase(br, decl, frozen, spec, undefined, o.tol);
          } catch (e) {
            ruleError(key, `case d=${spec.d} s=${spec.seq_len} seed=${spec.seed}: ${errorText(e)}`);
            break;
          }
          all.push(r);
          agg.n++;
          agg.ms.push(r.ms);
          agg.rt.push(r.roundTripMs);
          const y = group(r.diffs, "y", o.tol), st = group(r.diffs, "state.", o.tol), gr = group(r.diffs, "grads.", o.tol);
          if (y) agg.y.push(y);
          if (st) agg.st.push(st);
          if (gr) agg.gr.push(gr);
          if (r.diffs.some((d) => d.refMax === 0 && d.abs === 0 && d.name === "y")) agg.vac++;
          const bad = r.diffs.filter((d) => !(d.rel <= allowance(d, o.tol)));
          const ill = r.diffs.filter((d) => d.spread !== undefined && !bad.includes(d));
          for (const d of ill) agg.ill.push(`d=${spec.d} s=${spec.seq_len} ${spec.alpha}/${spec.theta}/${spec.state} seed=${spec.seed}: ${d.name} ${fmt(d.rel)}${spreadNote(d, o.tol)}`);
          if (r.stateFd !== null) agg.fd.push(r.stateFd);
          const fdBad = r.stateFd !== null && !r.stateFd.ok;
          failures += bad.length > 0 || fdBad ? 1 : 0;
          const h = Object.entries(spec.hyper).map(([n, v]) => `${n}=${typeof v === "number" ? +v.toPrecision(3) : v}`).join(",");
          if (o.verbose || bad.length > 0 || ill.length > 0 || fdBad) {
            console.log(`${key.padEnd(15)} d=${spec.d} s=${spec.seq_len} ${spec.alpha}/${spec.theta}/${spec.state} seed=${spec.seed} ${h}` +
              ` | y ${cell(y)} | state ${cell(st, true)} | grads ${cell(gr, true)} | d/dstate FD ${fdCell(r.stateFd === null ? [] : [r.stateFd])} | ${r.ms.toFixed(2)} ms` +
              (bad.length ? `  FAIL: ${bad.map((d) => `${d.name} ${fmt(d.rel)}${spreadNote(d, o.tol)}${d.note ? ` (${d.note})` : ""}`).join("; ")}` : "") +
              (ill.length ? `  ill-conditioned: ${ill.map((d) => `${d.name} ${fmt(d.rel)}${spreadNote(d, o.tol)}`).join("; ")}` : "") +
              (fdBad ? `  FAIL: d/dstate torch ${r.stateFd!.an} vs FD ${r.stateFd!.fd} (h ${r.stateFd!.h})` : ""));
          }
        }
      }
    }
    console.log("\n-- edge cases --");
    for (const edge of EDGES) {
      for (const decl of RULES) {
        if (!edge.rules.includes(decl.key)) continue;
        for (const frozen of decl.frozen === null ? [false] : [false, true]) {
          const key = frozen ? `${decl.key}.frozen` : decl.key;
          if (o.rules.length > 0 && !o.rules.includes(key) && !o.rules.includes(decl.key)) continue;
          if (o.select !== null && !o.select.rules.includes(key)) continue;
          if (errors.has(key)) continue;
          const spec: RuleCaseSpec = { d: 4, seq_len: 4, hyper: {}, alpha: "mid", theta: "large", state: "random", seed: 77 };
          let r: RuleCaseResult;
          try {
            r = await runRuleCase(br, decl, frozen, spec, edge.edit, o.tol);
          } catch (e) {
            ruleError(key, `edge case ${edge.id}: ${errorText(e)}`);
            continue;
          }
          const bad = r.diffs.filter((d) => !(d.rel <= allowance(d, o.tol)));
          failures += bad.length > 0 ? 1 : 0;
          const y = group(r.diffs, "y", o.tol), st = group(r.diffs, "state.", o.tol), gr = group(r.diffs, "grads.", o.tol);
          // An edge case is one more case of its rule variant: its C9 check judges it.
          const agg = perRule[key];
          if (agg !== undefined) {
            agg.n++;
            if (y) agg.y.push({ ...y, name: `${y.name} (edge: ${edge.id})` });
            if (st) agg.st.push({ ...st, name: `${st.name} (edge: ${edge.id})` });
            if (gr) agg.gr.push({ ...gr, name: `${gr.name} (edge: ${edge.id})` });
            for (const d of r.diffs) if (d.spread !== undefined && !bad.includes(d)) agg.ill.push(`edge ${edge.id}: ${d.name} ${fmt(d.rel)}${spreadNote(d, o.tol)}`);
          }
          const zero = r.diffs.filter((d) => d.refMax === 0 && d.abs === 0).length;
          edgeRows.push(`${edge.id.padEnd(34)} ${key.padEnd(15)} y ${cell(y).padEnd(8)} state ${cell(st).padEnd(8)} grads ${cell(gr, true).padEnd(20)} all-zero ${zero}/${r.diffs.length}  d/dstate FD ${fdCell(r.stateFd === null ? [] : [r.stateFd])}` +
            (bad.length ? `  FAIL: ${bad.map((d) => `${d.name} ${fmt(d.rel)}${spreadNote(d, o.tol)}`).join("; ")}` : ""));
        }
      }
    }
    console.log(edgeRows.join("\n"));
    console.log(`\n${"rule".padEnd(16)}${"cases".padStart(6)}  ${"y".padEnd(9)}${"state".padEnd(22)}${"grads".padEnd(26)}${"d/dstate vs FD".padEnd(18)}ms(bridge) ms(round trip)`);
    for (const [key, a] of Object.entries(perRule)) {
      console.log(`${key.padEnd(16)}${String(a.n).padStart(6)}  ${cell(worst(a.y, o.tol)).padEnd(9)}${cell(worst(a.st, o.tol), true).padEnd(22)}` +
        `${cell(worst(a.gr, o.tol), true).padEnd(26)}${fdCell(a.fd).padEnd(18)}${median(a.ms).toFixed(2).padStart(6)}     ${median(a.rt).toFixed(2).padStart(6)}`);
    }
    const skipped = new Set(all.flatMap((r) => r.skipped.map((s) => `${r.key}:${s.replace(/^grads\.state\..*/, "grads.state.*")}`)));
    console.log(`\nnot compared (torch only): ${[...skipped].sort().join(", ")}`);
    report.rules = Object.fromEntries(Object.entries(perRule).map(([k, a]) => [k, errors.has(k) ? { cases: a.n, error: errors.get(k) } : {
      cases: a.n, y: worst(a.y, o.tol), state: worst(a.st, o.tol), grads: worst(a.gr, o.tol),
      // The largest reference value compared in any case: 0 would mean every comparison was vacuous.
      refMax: Math.max(0, ...[...a.y, ...a.st, ...a.gr].map((d) => (Number.isFinite(d.refMax) ? d.refMax : 0))), stateFd: fdCell(a.fd), medianMs: median(a.ms), medianRoundTripMs: median(a.rt),
      ...(a.ill.length > 0 ? { illConditioned: a.ill } : {}),
    }]));
  }

  if (o.doModel && (o.select === null || o.select.model.length > 0)) {
    console.log("\n== model cases (MAG + CMS): torch vs hand-written oracle [vs tape] ==");
    console.log(`${"case".padEnd(46)}${"loss".padEnd(9)}${"model grads".padEnd(24)}${"level grads".padEnd(26)}${"buffers".padEnd(10)}${"context".padEnd(10)}active  [tape worst]   ms`);
    const rows: unknown[] = [];
    // --select keeps the cases it names; every case keeps the id and seed it has in a whole run.
    for (const def of modelCases(o).filter((d) => o.select === null || o.select.model.includes(d.id))) {
      const unknown = modelCaseRules(def).filter((k) => !known.has(k));
      let r: Awaited<ReturnType<typeof runModelCase>>;
      try {
        if (unknown.length > 0) throw new Error(unknownRuleMessage(unknown));
        r = await runModelCase(br, def);
      } catch (e) {
        failures++;
        console.log(`${def.id.padEnd(46)}ERROR: ${errorText(e)}`);
        rows.push({ id: def.id, error: errorText(e) });
        continue;
      }
      const loss = group(r.diffs, "loss", o.tol), gm = group(r.diffs, "grads.model.", o.tol), gl = group(r.diffs, "grads.levels.", o.tol);
      const eb = group(r.diffs, "error_buffers.", o.tol), cx = group(r.diffs, "context.", o.tol), tw = worst(r.tapeDiffs, o.tol);
      const bad = r.diffs.filter((d) => !(d.rel <= allowance(d, o.tol)));
      if (bad.length > 0 || !r.activeMatch) failures++;
      console.log(`${def.id.padEnd(46)}${cell(loss).padEnd(9)}${cell(gm, true).padEnd(24)}${cell(gl, true).padEnd(26)}${cell(eb).padEnd(10)}` +
        `${cell(cx).padEnd(10)}${(r.pattern + (r.activeMatch ? "" : "≠ts")).padEnd(8)}${cell(tw).padEnd(13)}${r.ms.toFixed(1)}` +
        (bad.length ? `  FAIL: ${bad.slice(0, 4).map((d) => `${d.name} ${fmt(d.rel)}${d.note ? ` (${d.note})` : ""}`).join("; ")}` : ""));
      if (o.verbose) for (const d of r.diffs) console.log(`    ${d.name.padEnd(32)} ${fmt(d.rel)}  (max|ts| ${fmt(d.refMax)})`);
      rows.push({ id: def.id, worst: worst(r.diffs, o.tol), loss, activeMatch: r.activeMatch, tapeWorst: tw, ms: r.ms });
    }
    report.model = rows;
  }

  if (o.doFixtures && (o.select === null || o.select.fixtures)) {
    const dir = o.golden ?? decodeURIComponent(new URL("../../fixtures/golden", import.meta.url).pathname);
    const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json")).sort() : [];
    let replayed = 0, skipped = 0, unknown = 0, worstAll: Diff | null = null;
    const failed: string[] = [];
    for (const f of files) {
      const doc = JSON.parse(readFileSync(`${dir}/${f}`, "utf8"));
      const rule = doc.target?.rule;
      // a fixture of a rule the torch side does not know: that rule's own checks already error
      if (typeof rule === "string" && !known.has(rule)) {
        unknown++;
        continue;
      }
      let r: Awaited<ReturnType<typeof replayFixture>>;
      try {
        r = await replayFixture(br, doc);
      } catch (e) {
        failures++;
        failed.push(`${f}: ${errorText(e)}`);
        console.log(`fixture ${f}: ERROR ${errorText(e)}`);
        continue;
      }
      if (r === null) {
        skipped++;
        continue;
      }
      replayed++;
      const w = worst(r.diffs, o.tol);
      if (w !== null && (worstAll === null || !(w.rel <= worstAll.rel))) worstAll = { ...w, name: `${f}: ${w.name}` };
      const bad = r.diffs.filter((d) => !(d.rel <= allowance(d, o.tol)));
      if (bad.length > 0 || !r.activeMatch) {
        failures++;
        const what = `${bad.map((d) => `${d.name} ${fmt(d.rel)}`).join("; ")}${r.activeMatch ? "" : " active decisions differ"}`;
        failed.push(`${f}: ${what}`);
        console.log(`fixture ${f}: FAIL ${what}`);
      } else if (o.verbose) console.log(`fixture ${f}: worst ${cell(w, true)}`);
    }
    console.log(`\n== golden fixtures (fixtures/golden): ${replayed} replayed through torch, ${skipped} f32 skipped${unknown > 0 ? `, ${unknown} of rules torch does not know` : ""}; worst ${worstAll === null ? "-" : `${fmt(worstAll.rel)} (${worstAll.name})`}`);
    report.fixtures = { replayed, skipped, worst: worstAll, failed, tol: o.tol };
  }

  await br.close();
  if (o.json !== null) await Bun.write(o.json, JSON.stringify(report, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v), 2));
  console.log(failures === 0 ? `\nall cases within ${o.tol}` : `\n${failures} case(s) over tolerance ${o.tol}`);
  return failures === 0 ? 0 : 1;
}

if (import.meta.main) process.exit(await main());
