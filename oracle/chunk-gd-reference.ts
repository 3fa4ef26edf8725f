/**
 * The chunk-start GD reference a kernel declaring that form is compared with
 * (docs/spec/kernel-abi.md#chunk-form): y and the final state, and every gradient the kernel ABI
 * names (each input's, the initial state's) of sum(y ⊙ dy) + Σ_n ⟨final_n, dFinal_n⟩, at the declared chunk size.
 * The gradients come from the rule's hand-written chunk backward, or from the tape for the matrix
 * family (whose chunk forms are tape ops). Runs in the dtype of the inputs it is given.
 */
import { abiOf, gradInput } from "../ffi/abi.ts";
import { add, frobeniusDot } from "../src/ops/index.ts";
import { chunkStartGdForward, chunkStartGdGrads } from "../src/rules/chunk-gd.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "../src/rules/types.ts";
import { withTape } from "../src/tape.ts";
import type { Tensor } from "../src/tensor.ts";
import type { SeqTensors } from "./kernel-case.ts";

/** y and the final state. */
export function chunkGdReferenceForward(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number): SeqTensors {
  const r = chunkStartGdForward(decl, inp, state, cfg, C);
  const out: SeqTensors = { y: r.y.data, state: {}, grads: {}, dState0: {} };
  for (const [n, t] of Object.entries(r.finalState)) out.state[n] = t.data;
  return out;
}

/** Every gradient the kernel ABI names for the rule; dFinal undefined = zero. */
export function chunkGdReferenceBackward(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): SeqTensors {
  const abi = abiOf(decl.key);
  if (abi === undefined) throw new Error(`rule '${decl.key}' has no kernel ABI`);
  const inputs = abi.grads.map(gradInput);
  const out: SeqTensors = { state: {}, grads: {}, dState0: {} };
  const hand = chunkStartGdGrads(decl, inp, state, cfg, C, dy, dFinal);
  if (hand !== undefined) {
    for (const n of inputs) out.grads[n] = hand[n]!;
    for (const n of Object.keys(state)) out.dState0[n] = hand[`state.${n}`]!;
    return out;
  }
  return withTape((tape) => {
    const named: Record<string, Tensor> = {};
    const given = inp as unknown as Record<string, Tensor | undefined>;
    for (const n of inputs) if (given[n] !== undefined) named[n] = tape.input(given[n]!);
    const st: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(state)) st[n] = tape.input(t);
    const r = chunkStartGdForward(decl, { ...inp, ...named } as InnerInputs, st, cfg, C);
    let loss = frobeniusDot([r.y, dy], {});
    if (dFinal !== undefined) for (const [n, t] of Object.entries(r.finalState)) loss = add([loss, frobeniusDot([t, dFinal[n]!], {})], {});
    tape.backward(loss);
    for (const [n, t] of Object.entries(named)) out.grads[n] = tape.grad(t)?.data ?? new Float64Array(t.size);
    for (const [n, t] of Object.entries(st)) out.dState0[n] = tape.grad(t)?.data ?? new Float64Array(t.size);
    return out;
  });
}
