/**
 * A kernel library's pair seen as the reference's InnerPair (one sequence: B = H = 1), so the level
 * machinery (src/rules/level.ts) can run a rule whose inner loop is the kernel, inside the tape.
 * The kernel's saved context is its workspace in library memory. The rule's opaque tape block
 * declares the reference pair's saved names, so the adapter packs its own context under them: the
 * first holds [workspace handle, initial state (the v2 backward reads it)...], the others are
 * placeholders. The backward frees the workspace.
 */
import type { InnerGrads, InnerInputs, InnerPair, Named, RuleConfig, RuleDecl, State } from "../src/rules/types.ts";
import { Tensor } from "../src/tensor.ts";
import { gradInput, isTokenGate, rowsPerToken, type Shape } from "./abi.ts";
import type { Arrays, RulePair, Workspace } from "./lib-types.ts";

function f32(t: Tensor, what: string): Float32Array {
  if (!(t.data instanceof Float32Array)) throw new Error(`${what}: kernel backends compute in f32, got ${t.dtype}`);
  return t.data;
}


/** Workspaces between a forward and its backward, by the handle stored in `saved`. */
const live = new Map<number, Workspace>();
let nextHandle = 1;

/** The kernel pair as an InnerPair, at checkpoint interval C. */
export function kernelInnerPair(decl: RuleDecl, pair: RulePair, C: number): InnerPair<string> {
  const a = pair.abi;
  const shapeOf = (cfg: RuleConfig): Shape => ({ B: 1, T: cfg.seq_len, H: 1, d: cfg.d });
  const inputArrays = (inp: InnerInputs): Arrays => {
    const out: Arrays = {};
    for (const n of a.inputs) {
      const t = inp[n];
      if (t === undefined) throw new Error(`rule '${a.rule}': inner input '${n}' missing`);
      out[n] = f32(t, `input ${n}`);
    }
    return out;
  };
  const names = decl.inner.saved;
  if (names.length === 0) throw new Error(`rule '${a.rule}': the reference pair saves nothing, so the kernel's context has no slot`);
  return {
    saved: names,
    forward(inp, state, cfg) {
      const st0: Arrays = Object.fromEntries(a.state.map((n) => [n, f32(state[n]!, `state ${n}`)]));
      const r = pair.forward(shapeOf(cfg), C, cfg, inputArrays(inp), st0);
      const handle = nextHandle++;
      live.set(handle, r.ws);
      const shapes = decl.stateShapes(cfg);
      const ctx = new Float32Array(1 + a.state.reduce((sum, n) => sum + st0[n]!.length, 0));
      ctx[0] = handle;
      let o = 1;
      for (const n of a.state) {
        ctx.set(st0[n]!, o);
        o += st0[n]!.length;
      }
      const saved: Record<string, Tensor> = {};
      for (const n of names) saved[n] = n === names[0] ? new Tensor("f32", [ctx.length], ctx) : new Tensor("f32", [1], new Float32Array(1));
      const finalState: Record<string, Tensor> = {};
      for (const n of a.state) finalState[n] = new Tensor("f32", shapes[n]!, r.state[n]!);
      return { y: new Tensor("f32", [cfg.seq_len, cfg.d], r.y), finalState, saved };
    },
    backward(saved: Named<string>, inp, dy, cfg: RuleConfig, dFinal?: State): InnerGrads {
      const ctx = f32(saved[names[0]!]!, "kernel context");
      const handle = ctx[0]!;
      const ws = live.get(handle);
      if (ws === undefined) throw new Error(`rule '${a.rule}': the kernel workspace of this forward was already released`);
      const shapes = decl.stateShapes(cfg);
      const st0: Arrays = {};
      let o = 1;
      for (const n of a.state) {
        const len = shapes[n]!.reduce((x, y) => x * y, 1);
        st0[n] = ctx.slice(o, o + len);
        o += len;
      }
      const dF = dFinal === undefined ? null : Object.fromEntries(a.state.map((n) => [n, dFinal[n] ? f32(dFinal[n]!, `d${n}`) : new Float32Array(st0[n]!.length)]));
      try {
        const g = pair.backward(shapeOf(cfg), C, cfg, inputArrays(inp), st0, ws, f32(dy, "dy"), dF);
        const out: Record<string, unknown> = {};
        for (const name of a.grads) {
          const n = gradInput(name);
          // a tokenRows input's gradient has its input's n rows per token: [s, n·d], or [s, n] for a gate
          const rows = a.tokenRows === undefined ? 0 : rowsPerToken(a, name, cfg);
          const shape = rows > 0 ? [cfg.seq_len, isTokenGate(a, n) ? rows : rows * cfg.d] : isTokenGate(a, n) ? [cfg.seq_len] : [cfg.seq_len, cfg.d];
          out[name] = new Tensor("f32", shape, g.grads[name]!);
        }
        out.dState0 = Object.fromEntries(a.state.map((n) => [n, new Tensor("f32", shapes[n]!, g.dState0[n]!)]));
        return out as InnerGrads;
      } finally {
        ws.free();
        live.delete(handle);
      }
    },
  };
}
