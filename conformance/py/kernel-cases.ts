/**
 * One generated case of a py: forward or backward check (docs/spec/py-backend.md#forward-check,
 * #backward-check): the kernel's tensors against ref64 under the flash-attention bound, per tensor
 * and sequence (conformance/c5/compare.ts).
 *
 * ref64 is the TypeScript reference pair in f64: forward (y, every final state) and backward given
 * dy AND a random non-zero d(final state) (every input gradient, and dState0, the initial
 * state's). ref32, the yardstick of the bound and the bias test, is the plain reference at the
 * kernel's precision: the PyTorch reference run in f32 (forward and autograd backward), its outputs
 * rounded to the kernel's storage and state dtypes (docs/spec/py-backend.md#reference, #precision).
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { Precision } from "../../src/precision.ts";
import type { InnerInputs, RuleDecl, State } from "../../src/rules/types.ts";
import type { Tensor } from "../../src/tensor.ts";
import { flashCompare, type Compared } from "../c5/compare.ts";
import { seqSlice, unpackTokens, type PyCase, type Seq } from "./cases.ts";
import { KernelFault, type KernelSession, type Out } from "./kernel-session.ts";

const asInputs = (r: Record<string, Tensor>) => r as unknown as InnerInputs;

function need(out: Out, name: string, what: string): Tensor {
  const t = out.get(name);
  if (t === undefined) throw new KernelFault("protocol", `${what}: the reply has no ${name}`);
  return t;
}

export function forwardNames(c: PyCase): string[] {
  return ["y", ...(c.frozen ? [] : c.stateNames.map((n) => `state ${n}`))];
}

export function backwardNames(c: PyCase): string[] {
  return [...c.inputs.map((n) => `d${n}`), ...c.stateNames.map((n) => `d${n} (initial state)`)];
}

/** The reference's f64 forward and backward of one sequence (active pair, or the frozen read). */
function ref64(decl: RuleDecl, c: PyCase, q: Seq): { y: Tensor; finalState: Record<string, Tensor>; grads: Record<string, Tensor | undefined>; dState0: Record<string, Tensor> } {
  if (c.frozen) {
    const fz = decl.frozen!;
    const fw = fz.forward(q.in64.q!, q.st64 as State, c.cfg);
    const g = fz.backward(fw.saved, q.in64.q!, q.dy64, c.cfg);
    return { y: fw.y, finalState: {}, grads: { dq: g.dq }, dState0: g.dState };
  }
  const fw = decl.inner.forward(asInputs(q.in64), q.st64 as State, c.cfg);
  const g = decl.inner.backward(fw.saved, asInputs(q.in64), q.dy64, c.cfg, q.dFinal64 as State) as Record<string, Tensor | undefined> & { dState0?: Record<string, Tensor> };
  return { y: fw.y, finalState: fw.finalState as Record<string, Tensor>, grads: g, dState0: g.dState0 ?? {} };
}

export async function forwardCase(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision): Promise<CaseOutcome> {
  const out = await s.forward(c, key);
  const r32 = await s.plainReference(c, key, p);
  const y = need(out, "y", "forward");
  const items: Compared[] = [];
  c.seqs.forEach((q, n) => {
    const r64 = ref64(decl, c, q);
    items.push({ name: "y", seq: n, kernel: unpackTokens(c, y, n), ref64: r64.y.data, ref32: seqSlice(c, need(r32, "y", "reference"), n) });
    if (c.frozen) return; // the read leaves the state as it was
    for (const name of c.stateNames) {
      items.push({
        name: `state ${name}`, seq: n, kernel: seqSlice(c, need(out, `state.${name}`, "forward"), n),
        ref64: r64.finalState[name]!.data, ref32: seqSlice(c, need(r32, `state.${name}`, "reference"), n),
      });
    }
  });
  return flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`, p);
}

export async function backwardCase(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision): Promise<CaseOutcome> {
  const out = await s.backward(c, key);
  const r32 = await s.plainReference(c, key, p);
  const items: Compared[] = [];
  c.seqs.forEach((q, n) => {
    const g64 = ref64(decl, c, q);
    for (const name of c.inputs) {
      items.push({
        name: `d${name}`, seq: n, kernel: unpackTokens(c, need(out, `grads.${name}`, "backward"), n),
        ref64: g64.grads[`d${name}`]!.data, ref32: seqSlice(c, need(r32, `grads.${name}`, "reference"), n),
      });
    }
    for (const name of c.stateNames) {
      const r = g64.dState0[name];
      if (r === undefined) throw new Error(`the reference backward of ${key} returns no gradient of the state ${name}`);
      items.push({
        name: `d${name} (initial state)`, seq: n, kernel: seqSlice(c, need(out, `grads.state.${name}`, "backward"), n),
        ref64: r.data, ref32: seqSlice(c, need(r32, `grads.state.${name}`, "reference"), n),
      });
    }
  });
  return flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`, p);
}
