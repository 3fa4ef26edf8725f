/**
 * A level's parameters and inputs: the canonical parameter names and shapes, which of them a rule
 * uses, input validation and the hyper-parameter defaults (docs/spec/names.md#layout).
 */
import { Tensor, expectShape, sameShape } from "../tensor.ts";
import { auxParam, gateShape, rowsOf, type RuleConfig, type RuleDecl, type State } from "./types.ts";

/** Canonical per-level parameter names (docs/spec/names.md#layout). */
export const MEMORY_PARAMS = ["W_K", "W_V", "W_Q", "w_alpha", "b_alpha", "w_theta", "b_theta", "w_eta", "b_eta"] as const;
export const ATTENTION_PARAMS = ["W_q", "W_k", "W_v"] as const;

export function paramNames(decl: RuleDecl): string[] {
  if (decl.projection === "attention") return [...ATTENTION_PARAMS];
  return [...MEMORY_PARAMS, ...(decl.auxInputs ?? []).map(auxParam), ...(decl.omega ? ["W_omega"] : [])];
}

export function paramShapes(decl: RuleDecl, cfg: RuleConfig): Record<string, number[]> {
  const d = cfg.d;
  if (decl.projection === "attention") return { W_q: [d, d], W_k: [d, d], W_v: [d, d] };
  const s: Record<string, number[]> = {
    // k and v with several rows per token (tokenRows): one d-row of W_K, W_V per row
    W_K: [rowsOf(decl, cfg, "k") * d, d], W_V: [rowsOf(decl, cfg, "v") * d, d], W_Q: [d, d],
    w_alpha: [2 * d], b_alpha: [1], w_theta: [2 * d], b_theta: [1], w_eta: [2 * d], b_eta: [1],
  };
  // a channel gate (gateShape): one weight row and one bias per key channel
  for (const g of decl.gates) if (gateShape(decl, g) === "channel") Object.assign(s, { [`w_${g}`]: [d, 2 * d], [`b_${g}`]: [d] });
  for (const n of decl.auxInputs ?? []) s[auxParam(n)] = [d, d];
  if (decl.omega) s.W_omega = [d, 2 * d];
  return s;
}

/** Parameters that get a gradient: the projections plus what the rule's gates and omega use. */
export function usedParams(decl: RuleDecl): string[] {
  if (decl.projection === "attention") return [...ATTENTION_PARAMS];
  const used = ["W_K", "W_V", "W_Q"];
  for (const g of decl.gates) used.push(`w_${g}`, `b_${g}`);
  for (const n of decl.auxInputs ?? []) used.push(auxParam(n));
  if (decl.omega) used.push("W_omega");
  return used;
}

export type Params = Readonly<Record<string, Tensor>>;

/**
 * The shapes validateInputs holds a call to, worked out once per declaration and configuration
 * (the same configuration object is passed to every call of a case, and every finite-difference
 * evaluation is such a call): parameter shapes, state shapes and the hyperparameter entries.
 */
interface Expected {
  readonly params: readonly (readonly [string, number[]])[];
  readonly state: readonly (readonly [string, number[]])[];
  readonly hyper: readonly (readonly [string, RuleDecl["hyper"][string]])[];
}
const expectedByCfg = new WeakMap<RuleConfig, Map<RuleDecl, Expected>>();

function expectedOf(decl: RuleDecl, cfg: RuleConfig): Expected {
  let byDecl = expectedByCfg.get(cfg);
  if (byDecl === undefined) expectedByCfg.set(cfg, (byDecl = new Map()));
  let e = byDecl.get(decl);
  if (e === undefined) {
    e = { params: Object.entries(paramShapes(decl, cfg)), state: Object.entries(decl.stateShapes(cfg)), hyper: Object.entries(decl.hyper) };
    byDecl.set(decl, e);
  }
  return e;
}

/** Validates X, params and state against the declaration; errors name rule, tensor, expected and got. */
export function validateInputs(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig): void {
  const expected = expectedOf(decl, cfg);
  const who = () => `rule '${decl.key}'`;
  if (!sameShape(X.shape, [cfg.seq_len, cfg.d])) expectShape(X, [cfg.seq_len, cfg.d], `${who()}: X`);
  for (const [name, shape] of expected.params) {
    const p = params[name];
    if (p === undefined) throw new Error(`${who()}: parameter ${name} is missing`);
    if (!sameShape(p.shape, shape)) expectShape(p, shape, `${who()}: parameter ${name}`);
    if (p.dtype !== X.dtype) throw new Error(`${who()}: parameter ${name} is ${p.dtype}, X is ${X.dtype}`);
  }
  for (const [name, shape] of expected.state) {
    const t = state[name];
    if (t === undefined) throw new Error(`${who()}: state ${name} is missing`);
    if (!sameShape(t.shape, shape)) expectShape(t, shape, `${who()}: state ${name}`);
  }
  for (const [name, spec] of expected.hyper) {
    const v = cfg[name];
    if (v === undefined) throw new Error(`${who()}: hyperparameter ${name} is missing`);
    if (spec.kind === "enum") {
      if (!spec.values.includes(String(v))) throw new Error(`${who()}: ${name} = ${v}, expected one of ${spec.values.join("|")}`);
    } else if (typeof v !== "number" || v < spec.min || v > spec.max || (spec.kind === "int" && !Number.isInteger(v))) {
      throw new Error(`${who()}: ${name} = ${v}, expected ${spec.kind} in [${spec.min}, ${spec.max}]`);
    } else if (spec.kind === "int" && spec.boundByD === "at-most" && v > cfg.d) {
      throw new Error(`${who()}: ${name} = ${v} must be <= d = ${cfg.d}`);
    } else if (spec.kind === "int" && spec.boundByD === "divides" && cfg.d % v !== 0) {
      throw new Error(`${who()}: ${name} = ${v} must divide d = ${cfg.d}`);
    }
  }
}

/** The configuration with every hyperparameter at its default unless given. */
export function withDefaults(decl: RuleDecl, cfg: { d: number; seq_len: number } & Record<string, number | string>): RuleConfig {
  const out: Record<string, number | string> = {};
  for (const [name, spec] of Object.entries(decl.hyper)) out[name] = spec.default;
  return { ...out, ...cfg } as RuleConfig;
}
