/**
 * `selftest --backend B`: runs the kernel checks of one backend and prints, per check, how each bug
 * signature planted into the outputs it judged fared (detected, at which ε; a blind spot; not
 * material; not exercised) and each check's detection power, then the power distribution
 * (docs/spec/conformance.md#signatures, docs/spec/precision.md#power).
 */
import { parseArgs } from "node:util";
import type { CheckResult, Profile } from "../harness/check.ts";
import { PROFILES } from "../harness/check.ts";
import { DEFAULT_SEED } from "../harness/collect.ts";
import { printable } from "../harness/progress.ts";
import { blindSpotsOf, powerOf, POWER_BUCKETS, summarizePower } from "../harness/report-power.ts";
import { SIGNATURES, type SignatureResult } from "../oracle/kernel-power.ts";
import { matchesFilter } from "./catalogue.ts";
import { runPlan } from "./parallel.ts";
import { CLI_NAMES, preflightBackends, planRun, UsageError, type RunPlan } from "./plan.ts";
import { writeRunReport } from "./run-report.ts";

export const SELFTEST_HELP = `Self-test of the kernel judge on one backend (docs/spec/conformance.md#signatures):
  selftest --backend B [--filter F]... [--seed N] [--profile P] [--report PATH]
                   run B's kernel checks and print per check and bug signature whether the
                   mutated outputs were detected (and at which scale error), and the power
                   distribution; exit 1 on a blind spot or a check that did not pass`;

const short: Record<SignatureResult["status"], string> = { detected: "yes", "blind-spot": "BLIND", immaterial: "-", "not-exercised": "n/a" };

/** One row's cell for a signature. */
function cell(r: SignatureResult | undefined): string {
  if (r === undefined) return "";
  if (r.status === "detected" && r.eps !== undefined) return `ε=${r.eps}`;
  return short[r.status];
}

const fmt = (p: number | null | undefined) => (p === null || p === undefined ? "none" : p.toExponential(2));

/** The table of a run's kernel checks (those that recorded a power or signatures). */
export function selftestTable(results: readonly CheckResult[]): string {
  const rows = results.filter((r) => powerOf(r) !== undefined || r.details?.signatures !== undefined);
  const head = ["check", "status", ...SIGNATURES, "power (weakest tensor, test)"];
  const body = rows.map((r) => {
    const sigs = (r.details?.signatures ?? {}) as Record<string, SignatureResult>;
    const p = powerOf(r);
    return [r.id, r.status, ...SIGNATURES.map((s) => cell(sigs[s])), p === undefined ? "" : `${fmt(p.power)} ${p.tensor} (${p.by})`];
  });
  const width = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(width[i]!)).join("  ").trimEnd();
  const out = [line(head), ...body.map(line)];
  out.push("", "yes: detected; ε=x: a scale error detected from x; BLIND: a material change passed (blind spot); -: no material change; n/a: never exercised");
  for (const r of rows) for (const b of blindSpotsOf(r)) out.push(`blind spot: ${r.id}: ${b}`);
  for (const r of rows) {
    for (const [s, v] of Object.entries((r.details?.signatures ?? {}) as Record<string, SignatureResult>)) {
      if (v.status === "not-exercised") out.push(`not exercised: ${r.id}: ${s}: ${v.reason ?? ""}`);
    }
  }
  const sum = summarizePower([...results]);
  if (sum !== undefined) {
    out.push("", `power over ${sum.checks} checks: weakest ${fmt(sum.weakest?.power)} (${sum.weakest?.id}, ${sum.weakest?.tensor}), median ${fmt(sum.median)}`);
    out.push(`  ${POWER_BUCKETS.map((b) => `${b}: ${sum.histogram[b] ?? 0}`).join("  ")}`);
  }
  return out.join("\n");
}

export async function runSelftest(argv: string[]): Promise<number> {
  let plan: RunPlan;
  try {
    const { values: a, positionals } = parseArgs({
      args: argv, allowPositionals: true,
      options: { backend: { type: "string" }, filter: { type: "string", multiple: true }, seed: { type: "string" }, profile: { type: "string" }, report: { type: "string" } },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`);
    if (a.backend === undefined) throw new UsageError("--backend B is required (e.g. --backend cpu-emu)");
    const seed = a.seed === undefined ? DEFAULT_SEED : Number(a.seed);
    if (!Number.isInteger(seed)) throw new UsageError(`--seed ${a.seed}: expected an integer`);
    const profile = (a.profile ?? "default") as Profile;
    if (!PROFILES.includes(profile)) throw new UsageError(`--profile ${a.profile}: expected ${PROFILES.join(" | ")}`);
    const filters = (a.filter ?? []).flatMap((f) => f.split(",")).map((f) => f.trim()).filter(Boolean);
    const base = planRun({ seed, profile, filters: [`C5/${a.backend}/`], fixtureDirs: [], backends: [a.backend], reportPath: a.report ?? null, names: CLI_NAMES });
    const defs = base.defs.filter((d) => matchesFilter(d, filters));
    if (defs.length === 0) throw new UsageError(`--filter ${filters.join(",")}: matches no kernel check of ${a.backend}`);
    plan = { ...base, defs, selected: new Set(defs.map((d) => d.id)) };
    preflightBackends(plan);
  } catch (e) {
    console.error(`conformance selftest: ${e instanceof Error ? e.message : String(e)}\n(see --help)`);
    return 2;
  }
  console.log(`selftest: ${plan.defs.length} kernel checks of ${plan.request.backends![0]}, seed ${plan.request.seed}, profile ${plan.request.profile}`);
  const outcome = await runPlan(plan);
  if (plan.request.reportPath !== null) writeRunReport(plan, outcome, new Date(), () => {});
  console.log(printable(selftestTable(outcome.results)));
  const bad = outcome.results.filter((r) => (r.status !== "pass" && r.status !== "skip") || blindSpotsOf(r).length > 0);
  for (const r of outcome.results) if (r.status !== "pass" && r.status !== "skip") console.log(`${r.status}: ${r.id}: ${printable(r.message ?? "")}`);
  console.log(`selftest: ${outcome.results.length - bad.length} of ${outcome.results.length} checks passed without a blind spot`);
  return bad.length > 0 ? 1 : 0;
}
