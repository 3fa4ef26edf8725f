/**
 * Detection power and output mutations of the kernel judge (docs/spec/precision.md#power,
 * docs/spec/conformance.md#signatures): the computed power is where the judge really flips; our f32
 * kernels detect a 0.1% scale error in every gradient, the bf16 build 1% through the bias test; the
 * planted 1% scale of a bf16 fixture is inside what the correct fixture's signatures detect; a judge
 * weakened 100x (a test-only parameter) shows blind spots and fails --min-power.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { flashCompare, withLedger, type Compared } from "../oracle/kernel-judge.ts";
import { ledgerOf, type CheckPower, type SignatureResult } from "../oracle/kernel-power.ts";
import { gateMinPower, parseMinPower, summarizePower } from "../harness/report-power.ts";
import { roundTo, type Precision } from "../src/precision.ts";
import { Rng } from "../src/rng.ts";
import { loadFixture } from "../cases/fixtures/load.ts";
import { replayFixture } from "../conformance/c6/replay.ts";
import { PLANTED } from "../fixtures/generate-kernel.ts";
import { ROOT } from "../paths.ts";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { CheckResult } from "../harness/check.ts";
import { compareTensors, tolerancePower, TOL_FD } from "../oracle/compare.ts";
import { validateReport } from "../harness/report.ts";
import { reportHtml } from "../harness/report-html.ts";
import { check, report } from "./synthetic-report.ts";

const BF16: Precision = { storage: "bf16", state: "f32", accumulate: "f32" };

/** A synthetic bf16-like case: B = 2, H = 2 sequences of T tokens of width 4; the kernel is a correct bf16 rounding of ref64. */
function bf16Case(seed: number, T = 12): Compared[] {
  const rng = new Rng(seed);
  const items: Compared[] = [];
  for (let n = 0; n < 4; n++) {
    const ref64 = Float64Array.from({ length: T * 4 }, () => rng.uniform(-1, 1));
    // the plain reference and the kernel: two different bf16 roundings of a slightly perturbed truth
    const ref32 = ref64.map((x) => roundTo("bf16", x * (1 + 1e-3 * rng.uniform(-1, 1))));
    const kernel = ref64.map((x) => roundTo("bf16", x * (1 + 1e-3 * rng.uniform(-1, 1))));
    items.push({ name: "dk", group: "grad", part: "token", seq: n, kernel, ref64, ref32 });
  }
  return items;
}
const LAYOUT = { B: 2, H: 2, T: 12, C: 4 };

test("the computed power is where the judge flips: a scale error just above it fails, just below it passes", () => {
  for (const seed of [1, 2, 3]) {
    const items = bf16Case(seed);
    const ex = new Set<string>();
    expect(flashCompare(items, ex, "k", BF16, { layout: LAYOUT, mutations: false }).ok).toBe(true);
    const p = ledgerOf(ex).power.get("dk")!.power!;
    const scaled = (eps: number) => items.map((i) => ({ ...i, kernel: Float64Array.from(i.kernel!, (x, j) => x + eps * i.ref64[j]!) }));
    // at 1.001 x power, a scale error of either sign fails
    expect(flashCompare(scaled(p * 1.001), new Set(), "k", BF16, { mutations: false }).ok).toBe(false);
    expect(flashCompare(scaled(-p * 1.001), new Set(), "k", BF16, { mutations: false }).ok).toBe(false);
    // and one of the two signs still passes just below it
    const below = [flashCompare(scaled(p * 0.999), new Set(), "k", BF16, { mutations: false }).ok, flashCompare(scaled(-p * 0.999), new Set(), "k", BF16, { mutations: false }).ok];
    expect(below.some(Boolean)).toBe(true);
  }
});

test("signatures on a correct bf16-like case: every material mutation detected; the judge weakened 100x shows blind spots and fails --min-power 1%", () => {
  const judge = (slack: number) => {
    const ex = new Set<string>();
    for (const seed of [1, 2, 3]) expect(flashCompare(bf16Case(seed), ex, "k", BF16, { layout: LAYOUT, slack }).ok).toBe(true);
    const r = withLedger({ id: "synthetic", class: "C5", subject: { backend: "synthetic" }, status: "pass" } as unknown as CheckResult, ex);
    return { r, sigs: r.details!.signatures as Record<string, SignatureResult>, power: r.details!.power as CheckPower };
  };
  const real = judge(1);
  expect(Object.values(real.sigs).filter((s) => s.status === "blind-spot")).toEqual([]);
  expect(real.sigs.scale!.eps).toBeLessThanOrEqual(1e-2);
  for (const s of ["sign-flip", "token-shift", "heads-swap", "sequences-swap", "element-drop", "after-first-chunk-zeroed"]) expect(`${s} ${real.sigs[s]!.status}`).toBe(`${s} detected`);
  expect(real.sigs["state-transpose"]!.status).toBe("not-exercised");
  expect(real.power.gradient!.power!).toBeLessThanOrEqual(1e-2);
  expect(gateMinPower(real.r, 0.01).status).toBe("pass");

  const weak = judge(100);
  const blind = (weak.r.details!.blind_spots as string[]);
  expect(blind.length).toBeGreaterThan(0);
  expect(weak.sigs.scale!.status).toBe("blind-spot");
  expect(weak.power.gradient!.power!).toBeGreaterThan(1e-2);
  const gated = gateMinPower(weak.r, 0.01);
  expect(gated.status).toBe("fail");
  expect(gated.message).toContain("the weakest gradient dk");
  expect(summarizePower([weak.r])!.blind_spots).toBe(1);
});

test("--min-power values: percentages, fractions, off; anything else is an error naming the setting", () => {
  expect(parseMinPower("1%", "--min-power")).toBeCloseTo(0.01, 12);
  expect(parseMinPower("0.001", "--min-power")).toBe(0.001);
  expect(parseMinPower("off", "--min-power")).toBeNull();
  expect(() => parseMinPower("abc", "NLC_MIN_POWER")).toThrow(/NLC_MIN_POWER abc/);
  expect(() => parseMinPower("5", "--min-power")).toThrow(/5%/);
});

test("the planted bf16 fixture (dk scaled by 1.01) fails, and the correct one's signatures and power say a 1% scale of dk is detected", () => {
  const replay = (p: string) => {
    const l = loadFixture(p);
    if (!l.ok) throw l.error;
    return replayFixture(l.fixture);
  };
  expect(replay(join(ROOT, PLANTED.dir, `${PLANTED.from}-${PLANTED.tensor}-scaled.json`)).ok).toBe(false);
  const good = replay(join(ROOT, "fixtures", "kernel", `${PLANTED.from}.json`));
  expect(good.ok).toBe(true);
  const power = good.details!.power as CheckPower;
  expect(power.tensors[PLANTED.tensor]!.power!).toBeLessThanOrEqual(0.01);
  const sigs = good.details!.signatures as Record<string, SignatureResult>;
  expect(sigs.scale!.eps).toBeLessThanOrEqual(0.01);
  expect(good.details!.blind_spots).toEqual([]);
});

const BACKENDS = ["cpu-emu", "cpu-bf16"];
let run: CheckResult[] | undefined;

/** Runs the CLI (its own process: backends are probed once per process) and returns the report's checks. */
function cli(args: string[]): { code: number; checks: CheckResult[] } {
  const dir = mkdtempSync(join(tmpdir(), "nlc-power-"));
  const report = join(dir, "report.json");
  const p = Bun.spawnSync({ cmd: [process.execPath, "conformance/cli.ts", ...BACKENDS.flatMap((b) => ["--backend", b]), "--profile", "quick", "--report", report, ...args], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const checks = JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[];
  rmSync(dir, { recursive: true, force: true });
  return { code: p.exitCode ?? -1, checks };
}

/** The gradient kernel checks (backward, chunks, gpu-blocks) of one backend at the quick profile: one run for both backends. */
function kernelChecks(backend: string): CheckResult[] {
  run ??= cli(["--filter", "/backward,/chunks,/gpu-blocks"]).checks;
  return run.filter((r) => r.id.startsWith(`C5/${backend}/`) && r.status !== "skip");
}

test("our f32 kernels (cpu-emu) detect a 0.1% scale error in every gradient tensor, with no blind spot", () => {
  const results = kernelChecks("cpu-emu");
  expect(results.length).toBeGreaterThan(20);
  for (const r of results) {
    expect(`${r.id} ${r.status}`).toBe(`${r.id} pass`);
    const p = r.details!.power as CheckPower;
    for (const [name, t] of Object.entries(p.tensors)) expect(`${r.id} ${name} ${t.power! <= 1e-3}`).toBe(`${r.id} ${name} true`);
    expect(`${r.id} ${r.details!.blind_spots}`).toBe(`${r.id} `);
  }
}, 600_000);

test("the bf16 build (cpu-bf16) detects a 1% scale error in every gradient tensor, by the bias test alone too", () => {
  const results = kernelChecks("cpu-bf16");
  expect(results.length).toBeGreaterThan(20);
  for (const r of results) {
    expect(`${r.id} ${r.status}`).toBe(`${r.id} pass`);
    const p = r.details!.power as CheckPower;
    expect(`${r.id} ${p.gradient!.tensor} ${p.gradient!.power! <= 1e-2}`).toBe(`${r.id} ${p.gradient!.tensor} true`);
    for (const [name, t] of Object.entries(p.tensors)) expect(`${r.id} ${name} bias ${t.bias! <= 1e-2}`).toBe(`${r.id} ${name} bias true`);
    expect(`${r.id} ${r.details!.blind_spots}`).toBe(`${r.id} `);
  }
}, 600_000);

test("--min-power through the runner: a pass whose weakest gradient cannot detect the asked scale error becomes a fail naming it", () => {
  const { code, checks } = cli(["--filter", "C5/cpu-emu/delta/backward", "--min-power", "1e-8"]);
  expect(code).toBe(1);
  const r = checks.find((c) => c.id === "C5/cpu-emu/delta/backward")!;
  expect(r.status).toBe("fail");
  expect(r.message).toMatch(/^--min-power 1\.00e-6%: the weakest gradient d\w+ detects a scale error only from 1\.\d+e-4% \(the bound\)/);
  expect(r.details!.min_power).toBe(1e-8);
}, 600_000);

test("finite-difference power: the smallest scale error of a tensor that leaves |a - b| <= 1e-8 + 1e-5|b| is where compareTensors flips", () => {
  const rng = new Rng(7);
  const fd = Float64Array.from({ length: 50 }, () => rng.uniform(-1e-3, 1e-3));
  const tape = fd.map((x) => x + rng.uniform(-1e-9, 1e-9));
  const p = tolerancePower(tape, fd, TOL_FD)!;
  const scaled = (eps: number) => ({ g: tape.map((x, i) => x + eps * fd[i]!) });
  expect(compareTensors(scaled(p * 1.001), { g: fd }, TOL_FD).ok && compareTensors(scaled(-p * 1.001), { g: fd }, TOL_FD).ok).toBe(false);
  expect(compareTensors(scaled(p * 0.999), { g: fd }, TOL_FD).ok || compareTensors(scaled(-p * 0.999), { g: fd }, TOL_FD).ok).toBe(true);
  // a gradient of 1e-4 with the 1e-8 absolute term: about 1e-4 relative, not the 1e-5 of rtol
  expect(p).toBeGreaterThan(1e-5);
});

test("a pass with a blind spot: schema-valid, counted in summary.power, outlined and listed in the HTML page", () => {
  const judged = (slack: number) => {
    const ex = new Set<string>();
    for (const seed of [1, 2]) flashCompare(bf16Case(seed), ex, "k", BF16, { layout: LAYOUT, slack });
    return withLedger(check("C5/cpu-bf16/delta/backward", "pass", { subject: { rule: "delta", backend: "cpu-bf16", phase: "backward" } }), ex);
  };
  const blind = judged(100), clean = judged(1);
  const doc = report([blind, clean]);
  validateReport(JSON.parse(JSON.stringify(doc)));
  expect(doc.summary.power!.blind_spots).toBe(1);
  expect(doc.summary.power!.checks).toBe(2);
  const html = reportHtml(doc, "r.json");
  expect(html).toContain("1 passing check with a blind spot");
  expect(html).toContain('"blind":["scale: dk at ε = 0.01, dk at ε = 0.1 changed by more than 1% of its scale and passed"]');
});
