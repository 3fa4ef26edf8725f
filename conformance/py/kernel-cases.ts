/**
 * One generated case of a py: forward or backward check (docs/spec/py-backend.md#forward-check,
 * #backward-check): the kernel's tensors against ref64 under the flash-attention bound whose
 * yardstick is ref32, per tensor and sequence (conformance/c5/compare.ts).
 *
 * Forward: the TypeScript reference (y and every final state). Backward: torch.autograd of the
 * inner reference with dy AND a random non-zero d(final state), for every input gradient and the
 * gradient of the initial state (docs/spec/py-backend.md#reference).
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { InnerInputs, RuleDecl, State } from "../../src/rules/types.ts";
import type { Tensor } from "../../src/tensor.ts";
import { flashCompare, type Compared } from "../c5/compare.ts";
import { seqSlice, unpackTokens, type PyCase } from "./cases.ts";
import { KernelFault, type KernelSession, type Out } from "./kernel-session.ts";

const asInputs = (r: Record<string, Tensor>) => r as unknown as InnerInputs;

function need(out: Out, name: string, what: string): Tensor {
  const t = out.get(name);
  if (t === undefined) throw new KernelFault("protocol", `${what}: the kernel host's reply has no ${name}`);
  return t;
}

export function forwardNames(c: PyCase): string[] {
  return ["y", ...c.stateNames.map((n) => `state ${n}`)];
}

export function backwardNames(c: PyCase): string[] {
  return [...c.inputs.map((n) => `d${n}`), ...c.stateNames.map((n) => `d${n} (initial state)`)];
}

export async function forwardCase(s: KernelSession, decl: RuleDecl, c: PyCase, exercised: Set<string>): Promise<CaseOutcome> {
  const out = await s.forward(c, decl.key);
  const y = need(out, "y", "forward");
  const items: Compared[] = [];
  c.seqs.forEach((q, n) => {
    const r64 = decl.inner.forward(asInputs(q.in64), q.st64 as State, c.cfg);
    const r32 = decl.inner.forward(asInputs(q.in32), q.st32 as State, c.cfg);
    items.push({ name: "y", seq: n, kernel: unpackTokens(c, y, n), ref64: r64.y.data, ref32: r32.y.data });
    for (const name of c.stateNames) {
      items.push({
        name: `state ${name}`, seq: n, kernel: seqSlice(c, need(out, `state.${name}`, "forward"), n),
        ref64: r64.finalState[name]!.data, ref32: r32.finalState[name]!.data,
      });
    }
  });
  return flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`);
}

export async function backwardCase(s: KernelSession, decl: RuleDecl, c: PyCase, exercised: Set<string>): Promise<CaseOutcome> {
  const out = await s.backward(c, decl.key);
  const [g64, g32] = await Promise.all([s.refBackward(c, decl.key, "f64"), s.refBackward(c, decl.key, "f32")]);
  const items: Compared[] = [];
  c.seqs.forEach((_, n) => {
    for (const name of c.inputs) {
      items.push({
        name: `d${name}`, seq: n, kernel: unpackTokens(c, need(out, `grads.${name}`, "backward"), n),
        ref64: seqSlice(c, need(g64, `grads.${name}`, "reference"), n), ref32: seqSlice(c, need(g32, `grads.${name}`, "reference"), n),
      });
    }
    for (const name of c.stateNames) {
      items.push({
        name: `d${name} (initial state)`, seq: n, kernel: seqSlice(c, need(out, `grads.state.${name}`, "backward"), n),
        ref64: seqSlice(c, need(g64, `grads.state.${name}`, "reference"), n), ref32: seqSlice(c, need(g32, `grads.state.${name}`, "reference"), n),
      });
    }
  });
  return flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`);
}
