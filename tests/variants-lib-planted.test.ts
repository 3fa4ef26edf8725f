/**
 * The variants of a native pair (docs/spec/kernel-abi.md#variants), proven by builds of
 * tests/libs/planted-delta.cpp that export nlk_delta_variants and nlk_delta_set_variant with two
 * variants, "scalar" (the library's own choice) and "tiled": the build whose "tiled" backward
 * scales dk by 1 + 1/128 fails backward naming the variant, and passes when only the library's own
 * choice is judged (NLC_KERNEL_CONFIGS=first), which says so; its correct twin passes with every
 * variant in details.configurations; a build that lists variants but cannot pin them fails naming
 * the missing function. A library without the functions reports no configurations (the plain
 * build). acrossVariants' order, limit and restored pin are held on a stub.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { buildPlantedLibs } from "./planted-libs.ts";
import type { CaseOutcome, CheckResult } from "../harness/check.ts";
import { ConfigTally } from "../harness/configurations.ts";
import { acrossVariants } from "../conformance/kernel/native/variants.ts";
import type { PairVariants } from "../ffi/lib-types.ts";

const PLANTS = ["plain", "variants", "variant_grad", "variants_half"] as const;
type Plant = (typeof PLANTS)[number];
const libOf = (p: Plant) => join(ROOT, "build", "test-libs", `libvariants_${p}.so`);
const idOf = (p: Plant, kind: string) => `C5/lib-libvariants_${p}/delta/${kind}`;

let built = false;
function buildLibs(): void {
  if (built) return;
  built = true;
  buildPlantedLibs("planted-delta.cpp", PLANTS, "plain", libOf);
}

function run(plants: readonly Plant[], limit: "all" | "first"): Map<string, CheckResult> {
  buildLibs();
  const dir = mkdtempSync(join(tmpdir(), "nlc-variants-"));
  try {
    const report = join(dir, "report.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...plants.flatMap((x) => ["--backend", `lib:${libOf(x)}`]), "--filter",
        plants.flatMap((x) => ["forward", "backward"].map((k) => idOf(x, k))).join(","), "--profile", "quick", "--seed", "1", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_KERNEL_CONFIGS: limit },
    });
    if (p.exitCode !== 0 && p.exitCode !== 1) throw new Error(`conformance exited ${p.exitCode}: ${p.stderr.toString()}`);
    return new Map((JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[]).map((c) => [c.id, c]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let allRun: Map<string, CheckResult> | undefined;
const all = () => (allRun ??= run(PLANTS, "all"));
const get = (m: Map<string, CheckResult>, p: Plant, kind: string): CheckResult => {
  const r = m.get(idOf(p, kind));
  if (r === undefined) throw new Error(`no result ${idOf(p, kind)}`);
  return r;
};
const status = (r: CheckResult, want: string) => expect(r.status === want ? want : `${r.status}: ${r.message}`).toBe(want);
const configurations = (r: CheckResult) => r.details?.configurations as { limit: string; judged: { name: string; cases: number }[]; not_judged: string[] } | undefined;

test("a variant's wrong gradient fails backward naming the variant; the correct twin passes under every variant", () => {
  const m = all();
  const bad = get(m, "variant_grad", "backward");
  status(bad, "fail");
  expect(bad.message).toStartWith("variant tiled: dk");
  status(get(m, "variant_grad", "forward"), "pass");
  for (const kind of ["forward", "backward"]) {
    const ok = get(m, "variants", kind);
    status(ok, "pass");
    const c = configurations(ok)!;
    expect(c.limit).toBe("all");
    expect(c.judged.map((j) => j.name)).toEqual(["default", "scalar", "tiled"]);
    expect(new Set(c.judged.map((j) => j.cases)).size).toBe(1);
    expect(c.judged[0]!.cases).toBeGreaterThan(0);
    expect(c.not_judged).toEqual([]);
  }
  expect(configurations(bad)!.judged.map((j) => j.name)).toEqual(["default", "scalar", "tiled"]);
}, 240_000);

test("a library without the variant functions is judged as before: no configurations, nothing said of variants", () => {
  for (const kind of ["forward", "backward"]) {
    const r = get(all(), "plain", kind);
    status(r, "pass");
    expect(configurations(r)).toBeUndefined();
    expect(r.message ?? "").not.toContain("variant");
  }
}, 240_000);

test("listing variants without nlk_delta_set_variant fails naming the missing function", () => {
  for (const kind of ["forward", "backward"]) {
    const r = get(all(), "variants_half", kind);
    status(r, "fail");
    expect(r.message).toContain("exports nlk_delta_variants without nlk_delta_set_variant");
  }
}, 240_000);

test("NLC_KERNEL_CONFIGS=first: the library's own choice only — the planted build passes, and the limit is said", () => {
  const m = run(["variant_grad"], "first");
  for (const kind of ["forward", "backward"]) {
    const r = get(m, "variant_grad", kind);
    status(r, "pass");
    expect(r.message).toContain("1 of 3 variants judged (NLC_KERNEL_CONFIGS=first");
    const c = configurations(r)!;
    expect(c.limit).toBe("first");
    expect(c.judged.map((j) => j.name)).toEqual(["default"]);
    expect(c.not_judged).toEqual(["scalar", "tiled"]);
  }
}, 240_000);

/** A stub pair: the pins it received, and a case that fails under the given variant index. */
function stub(failUnder: number | null): { v: PairVariants; pins: number[]; judge: () => CaseOutcome } {
  const pins: number[] = [];
  let current = -1;
  return {
    pins,
    v: { names: ["a", "b", "c"], pin: (i) => { pins.push(i); current = i; } },
    judge: () => (current === failUnder ? { ok: false, message: "off" } : { ok: true }),
  };
}

test("acrossVariants: own choice first, each variant pinned in order up to the first failure, the own choice restored", () => {
  const s = stub(1), t = new ConfigTally("all", "variants");
  const o = acrossVariants(s.v, t, s.judge);
  expect(o.ok).toBe(false);
  expect(o.message).toBe("variant b: off");
  expect(s.pins).toEqual([-1, 0, 1, -1]);
  expect((t.details()!.judged as { name: string }[]).map((j) => j.name)).toEqual(["default", "a", "b"]);
  const pass = stub(null), tp = new ConfigTally("all", "variants");
  expect(acrossVariants(pass.v, tp, pass.judge).ok).toBe(true);
  expect(pass.pins).toEqual([-1, 0, 1, 2, -1]);
  const own = stub(-1);
  expect(acrossVariants(own.v, new ConfigTally("all", "variants"), own.judge).message).toBe("variant default: off");
  const first = stub(0), tf = new ConfigTally("first", "variants");
  expect(acrossVariants(first.v, tf, first.judge).ok).toBe(true);
  expect(first.pins).toEqual([-1]);
  expect(tf.note()).toContain("1 of 4 variants judged");
  expect(acrossVariants("exports one without the other", tf, first.judge)).toEqual({ ok: false, message: "exports one without the other" });
  let called = 0;
  expect(acrossVariants(null, new ConfigTally("all", "variants"), () => (called++, { ok: true })).ok).toBe(true);
  expect(called).toBe(1);
});

test("an NLC_KERNEL_CONFIGS the suite does not know is a usage error (exit 2) with lib: backends alone too", () => {
  buildLibs();
  const p = Bun.spawnSync({
    cmd: [process.execPath, "conformance/cli.ts", "--backend", `lib:${libOf("variants")}`, "--filter", idOf("variants", "forward"), "--profile", "quick"],
    cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_KERNEL_CONFIGS: "every" },
  });
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain('NLC_KERNEL_CONFIGS="every": expected "all"');
}, 120_000);
