/**
 * The hazard probes on native libraries (docs/spec/hazards.md), each proven by a build of
 * tests/libs/hazards-delta.cpp (the Delta example with one hazard planted, right values
 * otherwise): a read one element past the end of alpha at d = 5, a write into theta, a write after
 * the end of y, two runs that differ. Each fails forward and backward by name; the control build
 * passes, and so does a build whose runs differ by an ulp and that declares a tolerance. The NaN fill of the outputs is held to its promise: a build that never writes the last
 * element of y fails on that element as unwritten, and the bytes a kernel leaves alone come back
 * as NaN (with a zero fill, both of these fail).
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { buildPlantedLibs } from "./planted-libs.ts";
import type { CheckResult } from "../harness/check.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { RulePair } from "../ffi/lib-types.ts";
import { POISON } from "../ffi/hazards.ts";

const PLANTS = ["none", "read_past", "write_input", "write_past", "unwritten", "nondet", "nondet_declared"] as const;
type Plant = (typeof PLANTS)[number];
const libOf = (p: Plant) => join(ROOT, "build", "test-libs", `libhazard_${p}.so`);
const idOf = (p: Plant, kind: string) => `C5/lib-libhazard_${p}/delta/${kind}`;

let built = false;
function buildLibs(): void {
  if (built) return;
  built = true;
  buildPlantedLibs("hazards-delta.cpp", PLANTS, "none", libOf);
}

let results: Map<string, CheckResult> | undefined;
function run(): Map<string, CheckResult> {
  if (results !== undefined) return results;
  buildLibs();
  const dir = mkdtempSync(join(tmpdir(), "nlc-hz-lib-"));
  try {
    const report = join(dir, "report.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...PLANTS.flatMap((x) => ["--backend", `lib:${libOf(x)}`]), "--filter",
        PLANTS.flatMap((x) => ["forward", "backward"].map((k) => idOf(x, k))).join(","), "--profile", "quick", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(1);
    results = new Map((JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[]).map((c) => [c.id, c]));
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const get = (p: Plant, kind: string): CheckResult => {
  const r = run().get(idOf(p, kind));
  if (r === undefined) throw new Error(`no result ${idOf(p, kind)}`);
  return r;
};
const status = (r: CheckResult, want: string) => expect(r.status === want ? want : `${r.status}: ${r.message}`).toBe(want);

test("lib: each planted hazard fails forward and backward by name; the control build passes", () => {
  const want: Record<Exclude<Plant, "none" | "unwritten" | "nondet_declared">, string> = {
    read_past: "input alpha: nlk_delta_forward read past its end",
    write_input: "nlk_delta_forward wrote into input theta (1 of its",
    write_past: "y: nlk_delta_forward wrote past its end (1 guard element(s) after it",
    nondet: "nlk_delta_forward is not deterministic: two runs of the same case differ: y differs by up to",
  };
  for (const kind of ["forward", "backward"]) {
    status(get("none", kind), "pass");
    for (const [p, message] of Object.entries(want)) {
      const r = get(p as Plant, kind);
      status(r, "fail");
      expect(r.message).toContain(message);
    }
  }
  // the read past alpha's end happens at key sizes that are not a power of two: the declared d = 5 case
  expect(get("read_past", "forward").message).toContain(' d=5 ');
}, 300_000);

test("lib: a library that declares its nondeterminism (nlk_nondeterminism) passes within its tolerance", () => {
  for (const kind of ["forward", "backward"]) status(get("nondet_declared", kind), "pass");
});

test("lib: an output element the kernel never writes fails as NaN, because outputs are NaN-filled", () => {
  const r = get("unwritten", "forward");
  status(r, "fail");
  expect(r.message).toMatch(/y \(sequence \d+\) at \(b=\d+, t=\d+, h=\d+, i=\d+\) is NaN where the reference is .* outputs are NaN-filled before every call: the kernel did not write this element/);
});

test("lib: what a kernel leaves unwritten comes back NaN, and what it writes comes back finite", () => {
  buildLibs();
  const lib = openKernelLib(libOf("unwritten"), () => ({ M: [5, 5] }));
  const pair = lib.pair("delta") as RulePair;
  const shape = { B: 1, T: 3, H: 2, d: 5 };
  const n = shape.B * shape.T * shape.H * shape.d, gates = shape.B * shape.T * shape.H;
  const tok = Float32Array.from({ length: n }, (_, i) => Math.sin(i + 1) * 0.5);
  const inputs = { k: tok, v: tok.map((x) => x * 0.7), q: tok.map((x) => -x), alpha: new Float32Array(gates).fill(0.25), theta: new Float32Array(gates).fill(0.5) };
  const f = pair.forward(shape, 1, { d: 5, seq_len: 3 }, inputs, { M: new Float32Array(shape.B * shape.H * 25) });
  f.ws.free();
  expect(Number.isNaN(f.y[n - 1]!)).toBe(true);
  expect(f.y.slice(0, n - 1).every(Number.isFinite)).toBe(true);
  // the poison is a NaN with a payload: its bits are what a guard holds
  expect(Number.isNaN(new Float32Array(new Uint32Array([POISON.f32]).buffer)[0]!)).toBe(true);
});
