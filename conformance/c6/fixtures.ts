/**
 * C6: one check per `nlc-fixture/1` file found under the given directories (docs/spec/conformance.md#c6;
 * docs/spec/fixtures.md#format). A fixture that cannot be loaded is an `error` check naming the
 * file and the JSON pointer of the problem; it never stops the other fixtures. Plus one check
 * that the loader behaves that way on known-bad test data.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import type { CaseOutcome, CheckDef, Subject } from "../../harness/check.ts";
import { ROOT } from "../../paths.ts";
import { runCheck } from "../../harness/run.ts";
import { findFixtureFiles, loadFixture } from "../../cases/fixtures/load.ts";
import { replayFixture } from "./replay.ts";
import { TOL_ULP } from "../../oracle/compare.ts";
import { FLOOR_REL, FLOOR_REL_F32_ACC } from "../../oracle/kernel-judge.ts";
import { levelPatternOf } from "../../cases/model-arb.ts";

const SPEC = "docs/spec/conformance.md#c6; docs/spec/README.md 'Fixture format nlc-fixture/1', 'Fixture details', 'Tolerance policy'";
const TOLERANCE = {
  kind: "fixture",
  policy: "the fixture's {rtol, atol} if given; else f64: |a−b| <= atol + rtol·|b| with the suite's tape-vs-hand-written bound; f32: max |fixture − f64 reference| <= 2 · max |plain f32 run − f64 reference| + 8 f32 ulp of the tensor's scale",
  f64: TOL_ULP,
};

/** A kernel case's tolerance: its declared precision (docs/spec/fixtures.md#kernel-judgement). */
const TOLERANCE_KERNEL = {
  kind: "declared precision (docs/spec/precision.md)",
  bound: "per tensor and sequence: max|fixture - ref64| <= 2 * max|plain - ref64| + floor, the plain reference run at the fixture's storage/state/accumulate",
  floor: `${FLOOR_REL} * max|ref64| (accumulate f64), ${FLOOR_REL_F32_ACC} * max|ref64| (accumulate f32)`,
  bias: "per tensor over every sequence: |slope of (fixture - ref64) on ref64| <= max(6 sigma, 2 |plain - ref64| / |ref64|, the storage dtype's floor)",
};

/** Where the loader's own test data lives (kept out of fixtures/ so the default run stays green). */
const MALFORMED_DIR = join(ROOT, "conformance", "data", "malformed");

/** Each bad file and the JSON pointer its error must name. */
const MALFORMED: Readonly<Record<string, string>> = {
  "bad-shape.json": "/inputs/X/data",
  "bad-dtype.json": "/dtype",
  "bad-param-name.json": "/inputs/params/W_x",
  "bad-target-id.json": "/inputs/target_ids/2",
  "bad-kernel-bf16-value.json": "/inputs/k/data/0",
  "not-json.json": "/",
};

/** A path as reports show it: relative to the repository when inside it, as given otherwise. */
function shown(p: string): string {
  const rel = relative(ROOT, p);
  return rel === "" ? "." : rel.startsWith("..") ? p : rel;
}

/** Subject fields read from the file without validating it (a broken file still gets its check). */
function peekSubject(file: string): Subject {
  const subject: Subject = { fixture: shown(file) };
  try {
    const doc = JSON.parse(readFileSync(file, "utf8")) as { target?: Record<string, unknown>; dtype?: unknown };
    const t = doc.target ?? {};
    if (typeof t.rule === "string") subject.rule = t.rule;
    if (typeof t.k === "number" && Number.isInteger(t.k)) subject.k = t.k;
    if (t.kind === "rule" || t.kind === "kernel") subject.frozen = t.frozen === true;
    else if (Array.isArray(t.active)) {
      const levels = levelPatternOf(t.active.map((a) => a === true));
      if (levels !== undefined) subject.levels = levels;
    }
    if (doc.dtype === "f64" || doc.dtype === "f32") subject.dtype = doc.dtype;
  } catch {
    // The check itself reports what is wrong with the file.
  }
  return subject;
}

function replayFile(file: string): CaseOutcome {
  const loaded = loadFixture(file);
  if (!loaded.ok) throw loaded.error;
  return replayFixture(loaded.fixture);
}

/** Whether the file says it is a kernel case (read without validating; the check reports what is wrong). */
function peekKernel(file: string): boolean {
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { target?: { kind?: unknown } }).target?.kind === "kernel";
  } catch {
    return false;
  }
}

function fileCheck(file: string, id: string, replayArgs: readonly string[]): CheckDef<unknown> {
  const kernel = peekKernel(file);
  return {
    kind: "single", id, class: "C6", subject: peekSubject(file), spec: kernel ? `${SPEC}; docs/spec/fixtures.md#kernel-cases; docs/spec/precision.md#flash` : SPEC,
    tolerance: kernel ? TOLERANCE_KERNEL : TOLERANCE, replayArgs, run: () => replayFile(file),
  };
}

/** One check per fixture file; a directory that is missing is itself an error check. */
function dirChecks(dirs: readonly string[]): CheckDef<unknown>[] {
  const checks: CheckDef<unknown>[] = [];
  const ids = new Set<string>();
  for (const dir of dirs) {
    const rel = shown(dir);
    // The project's own fixtures are always in the catalogue; a directory given on the command line is named again to replay.
    const replayArgs = resolve(dir) === resolve(ROOT, "fixtures") ? [] : ["--fixtures", dir];
    if (!existsSync(dir) || !statSync(dir).isDirectory()) {
      checks.push({
        kind: "single", id: `C6/${rel}`, class: "C6", subject: { fixture: rel }, spec: SPEC, tolerance: TOLERANCE, replayArgs,
        run: () => { throw new Error(`fixture directory ${dir} does not exist or is not a directory`); },
      });
      continue;
    }
    for (const file of findFixtureFiles(dir)) {
      // The file name alone when it is unique; the path when two directories share a name.
      let id = `C6/${basename(file)}`;
      if (ids.has(id)) id = `C6/${shown(file)}`;
      ids.add(id);
      checks.push(fileCheck(file, id, replayArgs));
    }
  }
  return checks;
}

/** The loader reports each bad file as an error naming file and pointer, and still replays the good one next to them. */
function malformedCase(): CaseOutcome {
  const files = findFixtureFiles(MALFORMED_DIR);
  const seen = new Set<string>();
  let good = 0;
  for (const file of files) {
    const name = basename(file);
    let loaded;
    try {
      loaded = loadFixture(file);
    } catch (e) {
      return { ok: false, message: `${name}: the loader threw (${e instanceof Error ? e.message : String(e)}) instead of reporting` };
    }
    const r = runCheck(fileCheck(file, `C6/${name}`, []), { seed: 1, profile: "quick" });
    const pointer = MALFORMED[name];
    if (pointer === undefined) {
      if (!loaded.ok || r.status !== "pass") return { ok: false, message: `${name}: a good fixture next to malformed ones gave ${r.status}: ${r.message ?? ""}` };
      good++;
      continue;
    }
    seen.add(name);
    if (loaded.ok) return { ok: false, message: `${name}: loaded without complaint, expected an error at ${pointer}` };
    if (r.status !== "error") return { ok: false, message: `${name}: status ${r.status}, expected error` };
    const msg = r.message ?? "";
    if (!msg.includes(file) || !msg.includes(`at ${pointer}:`)) return { ok: false, message: `${name}: the error must name the file and ${pointer}, got: ${msg}` };
  }
  const missing = Object.keys(MALFORMED).filter((n) => !seen.has(n));
  if (missing.length > 0) return { ok: false, message: `test data missing in ${MALFORMED_DIR}: ${missing.join(", ")} (run bun run fixtures:generate)` };
  if (good === 0) return { ok: false, vacuous: true, message: `no good fixture next to the malformed ones in ${MALFORMED_DIR}` };
  return { ok: true, message: `${seen.size} malformed fixtures reported as errors, ${good} good one replayed` };
}

export function fixtureChecks(dirs: readonly string[]): CheckDef<any>[] {
  return [
    ...dirChecks(dirs),
    {
      kind: "single", id: "C6/loader/malformed-is-error", class: "C6", subject: { fixture: shown(MALFORMED_DIR) }, spec: SPEC,
      tolerance: { kind: "exact", expected_errors: MALFORMED }, run: malformedCase,
    },
  ];
}
