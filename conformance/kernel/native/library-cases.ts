/**
 * The C5 checks beyond forward and backward: race (thread order reversed, bitwise), gpu-blocks
 * (forward and backward with blocks sized as in the cuda build), and tape-e2e (the rule with the
 * kernel as its inner loop, one opaque block on the tape, against the reference rule).
 */
import { kernelInnerPair } from "../../../ffi/kernel-pair.ts";
import type { KernelLib } from "../../../ffi/lib-types.ts";
import type { CaseOutcome } from "../../../harness/check.ts";
import { buildRuleCase, type RuleCase, type RuleCaseSpec } from "../../../cases/rule-case.ts";
import { paramNames, ruleForward, usedParams } from "../../../src/rules/level.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { withTape } from "../../../src/tape.ts";
import { Tensor, cast } from "../../../src/tensor.ts";
import type { AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { compareRuns, runAllKernels } from "./bitwise.ts";
import { flashCompare, type Compared } from "../../../oracle/kernel-judge.ts";
import { paramGradName } from "../../../cases/kernel-tensors.ts";
import { backwardCase, forwardCase } from "./phase-case.ts";
import { declaredPrecision } from "./backend.ts";
import { plainYardstick } from "../../../oracle/plain-reference.ts";
import { requireEmu, requirePair } from "./kernel-lib.ts";

/** Every kernel of the variant in thread order 0..n-1 and n-1..0: the bits must agree. */
export function raceCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec): CaseOutcome {
  const emu = requireEmu(lib);
  try {
    emu.setOrder(false);
    const fwd = runAllKernels(decl, frozen, lib, k);
    emu.setOrder(true);
    const rev = runAllKernels(decl, frozen, lib, k);
    return compareRuns(fwd, rev, "between thread order 0..n-1 and n-1..0");
  } finally {
    emu.setOrder(false);
  }
}

/** The forward case, then (if it passed) the backward case, with GPU-sized blocks (idle threads). */
export function gpuBlocksCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec, exercised: Set<string>): CaseOutcome {
  const emu = requireEmu(lib);
  emu.setGpuBlocks(true);
  try {
    const f = forwardCase(decl, frozen, lib, k, exercised);
    return f.ok ? backwardCase(decl, frozen, lib, k, exercised) : f;
  } finally {
    emu.setGpuBlocks(false);
  }
}

interface TapeRun {
  y: Tensor;
  grads: Record<string, Tensor | null>;
}

type TapeCase = Pick<RuleCase, "X" | "params" | "state" | "dy" | "cfg">;

function tapeRun(decl: RuleDecl, c: TapeCase, inner: RuleDecl["inner"]): TapeRun {
  return withTape((tape) => {
    const X = tape.input(c.X);
    const params: Record<string, Tensor> = {};
    for (const n of paramNames(decl)) params[n] = tape.param(c.params[n]!);
    const y = ruleForward(decl, X, params, c.state, c.cfg, inner).y;
    if (tape.length !== 1) throw new Error(`expected the rule as ONE opaque block on the tape, found ${tape.length} entries`);
    tape.backward(y, c.dy);
    const grads: Record<string, Tensor | null> = { X: tape.grad(X) };
    for (const n of usedParams(decl)) grads[n] = tape.grad(params[n]!);
    return { y, grads };
  });
}

/** The checkpoint interval of the pair inside the tape (any C must do; 4 makes the cases' T > 4 replay). */
export const E2E_CHECKPOINT = 4;

/** y and every gradient of the rule's inputs and parameters, kernel inside the tape vs the reference rule. */
export function e2eCase(decl: RuleDecl, lib: KernelLib, spec: RuleCaseSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const c32 = buildRuleCase(decl, spec, "f32");
  const to64 = (rec: Record<string, Tensor>) => Object.fromEntries(Object.entries(rec).map(([n, t]) => [n, cast(t, "f64")]));
  const c64: TapeCase = { ...c32, X: cast(c32.X, "f64"), params: to64(c32.params), state: to64(c32.state), dy: cast(c32.dy, "f64") };
  const kern = tapeRun(decl, c32, kernelInnerPair(decl, pair, E2E_CHECKPOINT));
  // the plain reference: the whole rule in f32, summed in the kernel's declared accumulate dtype
  const precision = declaredPrecision(lib, `nlk_${decl.key}_backward`);
  const flat = (r: TapeRun): Record<string, ArrayLike<number>> => {
    const out: Record<string, ArrayLike<number>> = { y: r.y.data };
    for (const [n, g] of Object.entries(r.grads)) if (g !== null && g !== undefined) out[paramGradName(n)] = g.data;
    return out;
  };
  const r64 = tapeRun(decl, c64, decl.inner), f64 = flat(r64);
  const r32 = plainYardstick(precision.accumulate, f64, () => flat(tapeRun(decl, c32, decl.inner)));
  const items: Compared[] = [{ name: "y", group: "out", seq: 0, kernel: kern.y.data, ref64: f64.y!, ref32: r32.y!, shape: r64.y.shape }];
  for (const n of Object.keys(r64.grads)) {
    const g64 = r64.grads[n], g32 = r32[paramGradName(n)], gk = kern.grads[n];
    if (g64 === null || g64 === undefined) return { ok: false, message: `no reference gradient reached ${n}` };
    items.push({ name: paramGradName(n), group: "grad", seq: 0, kernel: gk?.data, ref64: g64.data, ref32: g32 ?? new Float64Array(g64.data.length), shape: g64.shape });
  }
  return flashCompare(items, exercised, `rule '${decl.key}' with the ${lib.backend} kernel as its inner loop`, precision, { prefilled: true });
}
