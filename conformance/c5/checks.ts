/**
 * C5 — kernel pairs (docs/spec/conformance.md#c5; docs/spec/README.md tolerance policy, the flash-attention rule):
 * the catalogue side. For every backend, every rule of the registry, its frozen variant and SWA:
 *   C5/<backend>/<rule>[.frozen]/forward      y and the final state vs the f64 reference
 *   C5/<backend>/<rule>[.frozen]/backward     every gradient of the inner inputs vs the f64 reference
 *   C5/<backend>/<rule>/tape-e2e              the rule with the kernel as its inner loop, inside the tape
 *   C5/cpu-emu/<rule>[.frozen]/race           thread order reversed: outputs must be bitwise equal
 *   C5/cpu-emu/<rule>[.frozen]/gpu-blocks     forward and backward with blocks sized as on a GPU
 * plus checks of the emulation itself (planted race, barrier misuse, thread mode), crash, abort and
 * hang isolation, and the ABI header against the table in ffi/abi.ts.
 *
 * Process model. Native code never runs in the suite's process: each backend's checks run in ONE
 * child process (conformance/kernel-child.ts, where the cases and comparisons live), spawned
 * lazily by the first check that needs it, which runs them with runCheck and streams the results
 * back; a crash, abort or hang of the child turns the check it was running, and every check it did
 * not reach, into `error` naming the signal or the timeout, and the suite goes on.
 */
import { variantKey } from "../../src/rules/level.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ABI, pointerArgs, symbolName, type KernelFn } from "../../ffi/abi.ts";
import { backendSlug, kernelBackendNames, type Resolved } from "../../ffi/backends.ts";
import type { CaseOutcome, CheckDef, CheckResult, DelegatedResult, Profile, Subject } from "../../harness/check.ts";
import type { BackendInfo } from "../../harness/report.ts";
import { checkSeed } from "../../harness/run.ts";
import { RULES } from "../../src/rules/index.ts";
import type { RuleDecl } from "../../src/rules/types.ts";

import { ROOT } from "../../paths.ts";
const CHILD = join(import.meta.dir, "child.ts");

export const RUNS: Record<Profile, number> = { quick: 5, default: 30, deep: 300 };
export const RUNS_E2E: Record<Profile, number> = { quick: 4, default: 10, deep: 100 };
export const RUNS_GPU_BLOCKS: Record<Profile, number> = { quick: 2, default: 8, deep: 60 };

/** Relative floor of the flash-attention bound, per tensor and sequence. */
export const FLOOR_REL = 1e-6;
/** A compared tensor whose |ref64| never exceeds this in any case of a check was never exercised. */
export const EXERCISED = 1e-6;

export const TOLERANCE = {
  kind: "flash-attention rule (docs/spec/README.md, tolerance policy)",
  bound: "per tensor and sequence: max|kernel - ref64| <= 2 * max|ref32 - ref64| + floor",
  ref32: "the TypeScript reference run on f32 tensors (same inputs, rounded to f32 once)",
  floor: `${FLOOR_REL} * max|ref64|`,
  floor_reason:
    "on tiny cases (s = 1, d = 1) the f32 reference can be exact, while a kernel that sums in another order (threads, " +
    "FMA on a GPU) is a few f32 roundings (2^-24 relative each) off; 1e-6 relative is ~16 roundings of the largest value",
  vacuity: `a case whose compared references are all below ${EXERCISED} is vacuous; so is a check in which some compared tensor never exceeds it`,
};
export const TOL_BITWISE = { kind: "bitwise", reason: "the same kernel and inputs with the thread order reversed must give identical bits" };

// ── the plan: which checks exist (shared by the parent and the child) ──────────────────────

export type EntryKind = "forward" | "backward" | "race" | "gpu-blocks" | "tape-e2e" | "emu-race-detector" | "emu-sync" | "emu-thread-mode" | "planted";

export interface PlanEntry {
  id: string;
  kind: EntryKind;
  subject: Subject;
  spec: string;
  decl?: RuleDecl;
  frozen?: boolean;
  /** For `planted`: what the test kernel does (0 segv, 1 abort, 2 hang). */
  mode?: number;
}



/** Whether the backend's library has the emulation controls (known by name before it is loaded). */
function isEmu(backend: string): boolean {
  return backend === "cpu-emu";
}

export function c5Plan(backend: string): PlanEntry[] {
  const slug = backendSlug(backend);
  const out: PlanEntry[] = [];
  for (const decl of RULES) {
    for (const frozen of decl.frozen === null ? [false] : [false, true]) {
      const key = variantKey(decl.key, frozen);
      const subject = { rule: decl.key, frozen, backend };
      const sheet = `docs/spec/conformance.md#c5; ${decl.sheet}${frozen ? " (frozen read, D3)" : ""}; ffi/nlk.h`;
      out.push({ id: `C5/${slug}/${key}/forward`, kind: "forward", subject, spec: `${sheet}; README tolerance policy (f32)`, decl, frozen });
      out.push({ id: `C5/${slug}/${key}/backward`, kind: "backward", subject, spec: `${sheet}; docs/spec/decisions.md#d2, tolerance policy (f32)`, decl, frozen });
      if (isEmu(backend)) {
        out.push({ id: `C5/${slug}/${key}/race`, kind: "race", subject, spec: `${sheet}; cuda/README.md (race check)`, decl, frozen });
        out.push({
          id: `C5/${slug}/${key}/gpu-blocks`, kind: "gpu-blocks", subject, decl, frozen,
          spec: `${sheet}; cuda/README.md (emulation model): forward and backward with blocks sized as in the cuda build (idle threads)`,
        });
      }
      if (!frozen) {
        out.push({
          id: `C5/${slug}/${key}/tape-e2e`, kind: "tape-e2e", subject, decl, frozen,
          spec: `docs/spec/conformance.md#c5; docs/spec/tape.md#opaque blocks; src/rules/level.ts ruleForward(…, inner); ${decl.sheet}`,
        });
      }
    }
  }
  if (isEmu(backend)) {
    const subject = { backend };
    out.push({ id: `C5/${slug}/emu/race-detector`, kind: "emu-race-detector", subject, spec: "cuda/README.md (race check): a planted missing __syncthreads() is caught" });
    out.push({ id: `C5/${slug}/emu/sync-misuse`, kind: "emu-sync", subject, spec: "cuda/README.md (emulation model): divergent or abandoned __syncthreads() is an error status, never a hang" });
    out.push({ id: `C5/${slug}/emu/thread-mode`, kind: "emu-thread-mode", subject, spec: "cuda/README.md (emulation model): thread-per-CUDA-thread mode gives the fiber mode's bits" });
  }
  return out;
}

export function plantedEntry(backend: string, mode: number): PlanEntry {
  const what = ["segv", "abort", "hang"][mode]!;
  return { id: `C5/${backendSlug(backend)}/emu/planted-${what}`, kind: "planted", subject: { backend }, spec: "test-only kernel nlk_test_crash", mode };
}

// ── the parent side: probing, delegating to children ───────────────────────────────────────

export interface ChildRequest {
  backend: string;
  profile: Profile;
  /** Normal runs: the run seed (each check derives its own, exactly as runCheck does). */
  runSeed?: number;
  checks: { id: string; seed?: number; path?: string }[];
  /** Test only: run the planted-fault kernel of this mode where its id appears in `checks`. */
  plant?: number;
  timeoutMs?: number;
}

export interface ChildOutcome {
  results: Map<string, CheckResult>;
  /** Set when the child did not finish normally. */
  death?: string;
}

function bunPath(): string {
  return process.execPath;
}

/** The children's environment: NLC_KERNEL_PRELOAD becomes their LD_PRELOAD (e.g. the TSan runtime). */
function childEnv(): Record<string, string | undefined> {
  const preload = process.env.NLC_KERNEL_PRELOAD;
  return preload ? { ...process.env, LD_PRELOAD: preload } : { ...process.env };
}

/** A batch's time limit: NLC_KERNEL_TIMEOUT seconds, else generous for the deep profile (~1 s a check). */
function batchTimeoutMs(n: number): number {
  const env = Number(process.env.NLC_KERNEL_TIMEOUT);
  if (Number.isFinite(env) && env > 0) return env * 1000;
  return 60_000 + 3_000 * n;
}

function tail(s: string, n = 1500): string {
  const t = s.trim();
  return t.length <= n ? t : `…${t.slice(-n)}`;
}

/** The child's stderr for a message: Bun's crash banner reduced to its one informative line. */
function childStderr(s: string): string {
  const panic = s.split("\n").find((l) => l.startsWith("panic: "));
  if (panic !== undefined) return `${panic.trim()} (a fault in native kernel code; Bun's crash handler reports it as its own)`;
  return tail(s);
}

/** Runs a batch in a child process; checks it did not report become `error` with the cause. */
export function runChild(req: ChildRequest): ChildOutcome {
  const timeout = req.timeoutMs ?? batchTimeoutMs(req.checks.length);
  const proc = Bun.spawnSync({
    cmd: [bunPath(), CHILD, "--backend", req.backend, "--profile", req.profile],
    cwd: ROOT,
    stdin: Buffer.from(JSON.stringify(req)),
    stdout: "pipe",
    stderr: "pipe",
    timeout,
    killSignal: "SIGKILL",
    env: childEnv(),
  });
  const results = new Map<string, CheckResult>();
  let running: string | undefined;
  for (const line of proc.stdout.toString().split("\n")) {
    if (line.startsWith("@@nlc-start ")) running = line.slice(12).trim();
    else if (line.startsWith("@@nlc-result ")) {
      const r = JSON.parse(line.slice(13)) as CheckResult;
      results.set(r.id, r);
      if (running === r.id) running = undefined;
    }
  }
  const stderr = childStderr(proc.stderr.toString());
  let death: string | undefined;
  if (proc.exitedDueToTimeout) death = `timed out after ${Math.round(timeout / 1000)} s (killed)`;
  else if (proc.signalCode !== undefined && proc.signalCode !== null) death = `killed by ${proc.signalCode}`;
  else if (proc.exitCode !== 0) death = `exited with status ${proc.exitCode}`;
  if (death !== undefined) {
    const who = `the child process running C5 on ${req.backend}`;
    for (const c of req.checks) {
      if (results.has(c.id)) continue;
      const during = c.id === running;
      results.set(c.id, {
        id: c.id, class: "C5", subject: {}, status: "error", tolerance: {}, runs: 0, seed: c.seed ?? 0, path: "", replay: "", ms: 0, spec: "",
        message: during
          ? `${who} ${death} during this check; the rest of the suite continues${stderr ? `\nchild stderr: ${stderr}` : ""}`
          : `not run: ${who} ${death}${running ? ` while running ${running}` : ""}`,
      });
    }
  }
  return { results, death };
}

let probed: Resolved[] | undefined;

/** Builds and loads every configured backend in a child process (never in this one). */
function probeBackends(): Resolved[] {
  if (probed !== undefined) return probed;
  const names = kernelBackendNames();
  // Building is incremental, but a fresh checkout compiles every kernel (a minute with nvcc): say so.
  const t0 = performance.now();
  console.error(`kernel backends: building (if needed) and loading ${names.join(", ")} ...`);
  const proc = Bun.spawnSync({
    cmd: [bunPath(), CHILD, "--probe", "--backends", names.join(",")],
    cwd: ROOT, stdout: "pipe", stderr: "pipe", timeout: 900_000, killSignal: "SIGKILL", env: childEnv(),
  });
  const text = proc.stdout.toString();
  const line = text.split("\n").find((l) => l.startsWith("@@nlc-probe "));
  if (proc.exitCode === 0 && line !== undefined) {
    probed = JSON.parse(line.slice(12)) as Resolved[];
  } else {
    const why = proc.exitedDueToTimeout ? "timed out" : proc.signalCode ? `killed by ${proc.signalCode}` : `exit ${proc.exitCode}`;
    const reason = `probing the kernel backends failed (${why}): ${tail(proc.stderr.toString() + text)}`;
    probed = names.map((name) => ({ info: { name, available: false, reason }, problem: "broken" as const }));
  }
  console.error(`kernel backends: ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return probed;
}

/** The probe result of one backend (probing builds and loads them all, once, in a child). */
function resolved(backend: string): Resolved {
  const p = probeBackends().find((x) => x.info.name === backend);
  if (p === undefined) throw new Error(`backend ${backend} was not probed`);
  return p;
}

/**
 * The kernel backends for the report (ref is the catalogue's own). They are probed only when a
 * C5 check ran; otherwise they are listed as not probed, so a run filtered to other classes
 * never builds kernels.
 */
export function kernelBackends(): BackendInfo[] {
  if (probed !== undefined) return probed.map((p) => p.info);
  return kernelBackendNames().map((name) => ({ name, available: false, reason: "not probed: no C5 check ran in this run" }));
}

const cache = new Map<string, CheckResult>();

function cacheKey(id: string, seed: number, profile: Profile): string {
  return `${id}|${seed}|${profile}`;
}

function toDelegated(r: CheckResult): DelegatedResult {
  return { status: r.status, runs: r.runs, seed: r.seed, path: r.path, worst: r.worst ?? undefined, message: r.message, ms: r.ms };
}

/** Skip or error without running when the backend is unavailable or broken; null when usable. */
function backendVerdict(backend: string, seed: number): DelegatedResult | null {
  const p = resolved(backend);
  if (p.problem === "unavailable") return { status: "skip", runs: 0, seed, path: "", message: `backend ${backend} unavailable: ${p.info.reason}` };
  if (p.problem === "broken") return { status: "error", runs: 0, seed, path: "", message: `backend ${backend} is broken: ${p.info.reason}` };
  return null;
}

function delegateFor(backend: string, id: string, siblings: () => CheckDef<any>[]): NonNullable<CheckDef["delegate"]> {
  return ({ seed, runSeed, profile, replayPath, selected }) => {
    const verdict = backendVerdict(backend, seed);
    if (verdict !== null) return verdict;
    const key = cacheKey(id, seed, profile);
    let r = cache.get(key);
    if (r === undefined) {
      // A replay runs its one case; a normal run batches every selected check of this backend in one child.
      const req: ChildRequest = replayPath !== undefined
        ? { backend, profile, checks: [{ id, seed, path: replayPath }] }
        : { backend, profile, runSeed, checks: siblings().filter((c) => c.id === id || selected.has(c.id)).map((c) => ({ id: c.id })) };
      const out = runChild(req);
      for (const [cid, res] of out.results) {
        const s = req.runSeed !== undefined ? checkSeed(req.runSeed, cid) : seed;
        cache.set(cacheKey(cid, s, profile), res);
      }
      r = cache.get(key);
      if (r === undefined) throw new Error(`the ${backend} child process returned no result for ${id}`);
    }
    return toDelegated(r);
  };
}

function abiHeaderCheck(): CaseOutcome {
  const text = readFileSync(join(ROOT, "ffi", "nlk.h"), "utf8");
  const macros = new Map<string, string>();
  for (const m of text.matchAll(/^#define (NLK_\w+_HYPER) (.+)$/gm)) macros.set(m[1]!, m[2]!);
  const protos = new Map<string, string[]>();
  for (const m of text.matchAll(/NLK_API int (nlk_\w+)\(([^;]*)\);/g)) {
    let params = m[2]!.replace(/\s+/g, " ");
    for (const [k, v] of macros) params = params.replaceAll(k, v);
    protos.set(m[1]!, params.split(",").map((p) => p.trim().split(" ").pop()!.replace(/^\*/, "")));
  }
  const alias: Record<string, string> = { q_exp: "q" };
  for (const a of ABI) {
    const fns: KernelFn[] = a.frozen === null ? ["forward", "backward"] : ["forward", "backward", "frozen_forward", "frozen_backward"];
    for (const fn of fns) {
      const sym = symbolName(a.rule, fn);
      const got = protos.get(sym);
      if (got === undefined) return { ok: false, message: `ffi/nlk.h does not declare ${sym}` };
      const { inputs, outputs } = pointerArgs(a, fn);
      const want = ["B", "s", "d", ...a.hyper.map((h) => h.name), ...inputs, ...outputs];
      const names = got.map((n) => alias[n] ?? n);
      if (names.join(",") !== want.join(",")) return { ok: false, message: `${sym}: nlk.h has (${names.join(", ")}), ffi/abi.ts says (${want.join(", ")})` };
    }
  }
  return { ok: true };
}

function crashIsolation(mode: number, profile: Profile): CaseOutcome {
  const before = `C5/cpu-emu/hebbian.frozen/forward`, after = `C5/cpu-emu/delta.frozen/forward`;
  const planted = plantedEntry("cpu-emu", mode).id;
  const hang = mode === 2;
  // The hang's timeout is short: build first, so that it cannot expire during a build.
  const build = Bun.spawnSync({ cmd: [bunPath(), join(ROOT, "ffi", "build.ts"), "cpu", "cpu-test"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) return { ok: false, message: `building the cpu-emu test library failed: ${tail(build.stderr.toString())}` };
  const out = runChild({
    backend: "cpu-emu", profile: profile === "deep" ? "default" : "quick", runSeed: 1, plant: mode,
    checks: hang ? [{ id: planted }] : [{ id: before }, { id: planted }, { id: after }],
    timeoutMs: hang ? 4000 : undefined,
  });
  const p = out.results.get(planted);
  const want = hang ? /timed out/ : mode === 0 ? /SIGSEGV/ : /SIGABRT/;
  if (p === undefined || p.status !== "error" || !want.test(p.message ?? "") || !/during this check/.test(p.message ?? "")) {
    return { ok: false, message: `the planted fault should be an 'error' naming ${want.source}; got ${p?.status}: ${p?.message}` };
  }
  if (!hang) {
    const b = out.results.get(before), a = out.results.get(after);
    if (b?.status !== "pass") return { ok: false, message: `the check before the crash should still report: ${b?.status} ${b?.message ?? ""}` };
    if (a?.status !== "error" || !/not run/.test(a.message ?? "")) return { ok: false, message: `the check after the crash should be 'error: not run', got ${a?.status} ${a?.message ?? ""}` };
  }
  return { ok: true, message: p.message };
}

/** Every C5 check: per configured backend, and the checks of the machinery itself. */
export function kernelChecks(): CheckDef<any>[] {
  const checks: CheckDef<any>[] = [];
  for (const backend of kernelBackendNames()) {
    const mine: CheckDef<any>[] = [];
    for (const e of c5Plan(backend)) {
      mine.push({
        id: e.id, class: "C5", subject: e.subject, spec: e.spec,
        tolerance: e.kind === "race" || e.kind.startsWith("emu") ? TOL_BITWISE : TOLERANCE,
        runs: e.kind === "tape-e2e" ? RUNS_E2E : e.kind === "gpu-blocks" ? RUNS_GPU_BLOCKS : RUNS,
        delegate: delegateFor(backend, e.id, () => mine),
        run: () => ({ ok: false, message: "runs in a child process (delegate)" }),
      });
    }
    checks.push(...mine);
  }
  const emu = kernelBackendNames().includes("cpu-emu");
  const meta = (id: string, spec: string, run: (profile: Profile) => CaseOutcome): CheckDef<any> => ({
    id, class: "C5", subject: { backend: "cpu-emu" }, spec, tolerance: { kind: "process isolation" },
    skip: emu ? undefined : "the cpu-emu backend is not configured",
    delegate: ({ seed, profile }) => {
      const verdict = backendVerdict("cpu-emu", seed);
      if (verdict !== null) return verdict;
      const r = run(profile);
      return { status: r.ok ? "pass" : "fail", runs: 1, seed, path: "", message: r.message };
    },
    run: () => ({ ok: false, message: "delegated" }),
  });
  checks.push(meta("C5/cpu-emu/emu/crash-isolation", "docs/spec/conformance.md#c5; cuda/README.md (crash isolation): a kernel that segfaults becomes an error check, the run goes on",
    (profile) => crashIsolation(0, profile)));
  checks.push(meta("C5/cpu-emu/emu/abort-isolation", "cuda/README.md (crash isolation): a kernel that aborts becomes an error check",
    (profile) => crashIsolation(1, profile)));
  checks.push(meta("C5/cpu-emu/emu/hang-isolation", "cuda/README.md (crash isolation): a kernel that never returns is killed at the timeout and becomes an error check",
    (profile) => crashIsolation(2, profile)));
  checks.push({
    id: "C5/abi/header-matches-table", class: "C5", subject: {}, spec: "ffi/nlk.h vs ffi/abi.ts (the table every caller is derived from)",
    tolerance: { kind: "exact" }, run: () => abiHeaderCheck(),
  });
  return checks;
}

/** The entry the child resolves a requested id to (planted faults only when asked for). */
export function childPlan(backend: string, plant: number | undefined): Map<string, PlanEntry> {
  const m = new Map(c5Plan(backend).map((e) => [e.id, e]));
  if (plant !== undefined) {
    const p = plantedEntry(backend, plant);
    m.set(p.id, p);
  }
  return m;
}

