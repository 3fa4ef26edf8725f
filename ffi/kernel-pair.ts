/**
 * A kernel library's pair seen as the reference's InnerPair (one sequence, B = 1), so
 * the level machinery (src/rules/level.ts) can run a rule whose inner loop is the kernel, inside
 * the tape. The kernel pair declares the reference's `saved` names, so the opaque block registered
 * for the rule accepts it unchanged.
 */
import type { InnerGrads, InnerInputs, InnerPair, Named, RuleConfig, RuleDecl, State } from "../src/rules/types.ts";
import { Tensor } from "../src/tensor.ts";
import { gradInput, inputShape } from "./abi.ts";
import type { Arrays, RulePair } from "./lib.ts";

function f32(t: Tensor, what: string): Float32Array {
  if (!(t.data instanceof Float32Array)) throw new Error(`${what}: kernel backends compute in f32, got ${t.dtype}`);
  return t.data;
}

function inputArrays(pair: RulePair, inp: InnerInputs): Arrays {
  const out: Arrays = {};
  for (const n of pair.abi.inputs) {
    const t = inp[n];
    if (t === undefined) throw new Error(`rule '${pair.abi.rule}': inner input '${n}' missing`);
    out[n] = f32(t, `input ${n}`);
  }
  return out;
}

function stateArrays(names: readonly string[], state: State): Arrays {
  const out: Arrays = {};
  for (const n of names) {
    const t = state[n];
    if (t === undefined) throw new Error(`state '${n}' missing`);
    out[n] = f32(t, `state ${n}`);
  }
  return out;
}

export function kernelInnerPair(decl: RuleDecl, pair: RulePair): InnerPair<string> {
  const names = pair.abi.saved.map((t) => t.name);
  const same = names.length === decl.inner.saved.length && names.every((n) => decl.inner.saved.includes(n));
  if (!same) throw new Error(`rule '${decl.key}': kernel saves [${names}] but the reference pair declares [${decl.inner.saved}]`);
  return {
    saved: decl.inner.saved,
    forward(inp, state, cfg) {
      const r = pair.forward(cfg, 1, inputArrays(pair, inp), stateArrays(pair.abi.state, state));
      const shapes = decl.stateShapes(cfg);
      const finalState: Record<string, Tensor> = {};
      for (const n of pair.abi.state) finalState[n] = new Tensor("f32", shapes[n]!, r.state[n]!);
      const saved: Record<string, Tensor> = {};
      for (const t of pair.abi.saved) saved[t.name] = new Tensor("f32", t.shape(cfg), r.saved[t.name]!);
      return { y: new Tensor("f32", [cfg.seq_len, cfg.d], r.y), finalState, saved };
    },
    backward(saved: Named<string>, inp, dy, cfg: RuleConfig): InnerGrads {
      const s: Arrays = {};
      for (const t of pair.abi.saved) s[t.name] = f32(saved[t.name]!, `saved ${t.name}`);
      const g = pair.backward(cfg, 1, inputArrays(pair, inp), s, f32(dy, "dy"));
      const out: Record<string, Tensor> = {};
      for (const name of pair.abi.grads) out[name] = new Tensor("f32", inputShape(gradInput(name), cfg), g[name]!);
      return out as InnerGrads;
    },
  };
}
