/**
 * Inputs for the rule checks. A case is described by a small spec that fast-check generates and
 * shrinks (sizes, hyperparameters, gate regime, state kind, seed); the tensors are then built
 * deterministically from the spec's seed.
 */
import * as fc from "fast-check";
import { frozenForward, paramNames, paramShapes, ruleForward, withDefaults, type Params } from "../src/rules/level.ts";
import type { RuleConfig, RuleDecl, State } from "../src/rules/types.ts";
import { Rng, uniformTensor } from "../src/rng.ts";
import { Tensor, type DType } from "../src/tensor.ts";
import { maxAbs } from "../src/numeric.ts";

/** Gate regimes of docs/spec/conformance.md: alpha near 0 / mid / near 1, theta small / large. */
export const ALPHA_LEVELS = { low: 0.05, mid: 0.5, high: 0.95 } as const;
export const THETA_LEVELS = { small: 0.05, large: 0.8 } as const;

export interface RuleCaseSpec {
  readonly d: number;
  readonly seq_len: number;
  readonly hyper: Readonly<Record<string, number | string>>;
  readonly alpha: keyof typeof ALPHA_LEVELS;
  readonly theta: keyof typeof THETA_LEVELS;
  readonly state: "init" | "random";
  readonly seed: number;
  /**
   * A case of the regime profile's `long` batch for a rule that declares how that regime draws its
   * inputs (RuleDecl.longInputs): its inner inputs are shaped by the declaration (cases/long-inputs.ts).
   */
  readonly longInputs?: true;
}

export interface RuleCase {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
  readonly X: Tensor;
  readonly params: Record<string, Tensor>;
  readonly state: Record<string, Tensor>;
  readonly dy: Tensor;
  /**
   * Upstream gradient of the final state (active variants of stateful rules), keyed by state
   * name, entries U(−1, 1): non-zero so the initial-state gradient is informative
   * (docs/spec/state-gradients.md#checks). Drawn from its own stream, so the other tensors of a
   * spec are what they were before it existed.
   */
  readonly dFinal?: State;
}

export interface SizeLimits {
  readonly d: [number, number];
  readonly seq_len: [number, number];
}

export const RULE_SIZES: SizeLimits = { d: [1, 12], seq_len: [1, 9] };

/** Resolution of a generated real hyperparameter: (hi − lo) / 2^20. */
const REAL_STEPS = 1 << 20;

/** fast-check arbitrary over case specs for a rule; hyperparameters range over their declared domains. */
export function ruleCaseSpecArb(decl: RuleDecl, sizes: SizeLimits = RULE_SIZES): fc.Arbitrary<RuleCaseSpec> {
  const mins = decl.checkMinimums ?? {};
  const hyperArbs: Record<string, fc.Arbitrary<number | string>> = {};
  for (const [name, h] of Object.entries(decl.hyper)) {
    if (h.kind === "enum") {
      hyperArbs[name] = fc.constantFrom(...h.values);
      continue;
    }
    const [lo, hi] = h.sample ?? [h.min, h.max];
    if (h.kind === "int") {
      hyperArbs[name] = fc.integer({ min: Math.max(lo, mins.hyper?.[name] ?? lo), max: hi });
    } else {
      // Uniform over [lo, hi] (shrinking toward lo): fc.double draws by exponent, so most of its
      // values in e.g. [0, 0.25] are below 1e-100 and a λ-dependent path would go untested.
      const range = fc.integer({ min: 0, max: REAL_STEPS }).map((i) => lo + ((hi - lo) * i) / REAL_STEPS);
      hyperArbs[name] = h.atoms !== undefined && h.atoms.length > 0 ? fc.oneof(fc.constantFrom(...h.atoms), range) : range;
    }
  }
  return fc.record({
    d: fc.integer({ min: Math.max(sizes.d[0], mins.d ?? 1), max: sizes.d[1] }),
    seq_len: fc.integer({ min: Math.max(sizes.seq_len[0], mins.seq_len ?? 1), max: sizes.seq_len[1] }),
    hyper: fc.record(hyperArbs),
    alpha: fc.constantFrom("mid", "low", "high"),
    theta: fc.constantFrom("small", "large"),
    state: fc.constantFrom("init", "random"),
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
  }).map((s) => clampHyper(decl, s));
}

/** Hyperparameters the declaration bounds by d (at most d, or a divisor of d) are clipped after generation. */
export function clampHyper(decl: RuleDecl, s: RuleCaseSpec): RuleCaseSpec {
  const hyper = { ...s.hyper };
  for (const [name, h] of Object.entries(decl.hyper)) {
    if (h.kind !== "int" || h.boundByD === undefined || !(name in hyper)) continue;
    let v = Math.min(Number(hyper[name]), s.d);
    if (h.boundByD === "divides") while (s.d % v !== 0) v--;
    hyper[name] = v;
  }
  return { ...s, hyper };
}

/**
 * A regime batch's case (docs/spec/conformance.md#regime): `base` at the regime's d and T (never
 * below the rule's check minimums), its bounded integer hyperparameters clamped, and in the `long`
 * regime its real hyperparameters kept to their `longSample` ranges and, for a rule that declares
 * `longInputs`, the case marked for its input shaper.
 */
export function regimeCase(decl: RuleDecl, base: RuleCaseSpec, shape: { readonly regime: string; readonly d: number; readonly T: number }): RuleCaseSpec {
  const mins = decl.checkMinimums ?? {};
  const sized = clampHyper(decl, { ...base, d: Math.max(shape.d, mins.d ?? 1), seq_len: Math.max(shape.T, mins.seq_len ?? 1) });
  if (shape.regime !== "long") return sized;
  const long = longHyper(decl, sized);
  return decl.longInputs === undefined ? long : { ...long, longInputs: true };
}

/**
 * The case with every real hyperparameter that declares a `longSample` clamped into it: what a
 * generated case of a thousand tokens and more keeps to (the regime profile's `long` batch,
 * docs/spec/conformance.md#regime).
 */
export function longHyper(decl: RuleDecl, s: RuleCaseSpec): RuleCaseSpec {
  const hyper = { ...s.hyper };
  for (const [name, h] of Object.entries(decl.hyper)) {
    if (h.kind !== "real" || h.longSample === undefined || !(name in hyper)) continue;
    hyper[name] = Math.min(Math.max(Number(hyper[name]), h.longSample[0]), h.longSample[1]);
  }
  return { ...s, hyper };
}

/**
 * The same case at every other value of each enumerated hyperparameter (Lattice's write variant).
 * A value can leave an input unused (Lattice's encode writes k and never reads v, and similarity
 * at d = 1 writes nothing), so a check drawing the value at random could, at some seed, compare
 * that input's gradient only where it is zero and be vacuous. Kernel checks run these cases as
 * fixed examples beside the generated ones: every value runs in every check at every seed
 * (docs/spec/conformance.md#enum-examples). Needs d >= 2 to exercise similarity.
 */
export function otherEnumValues(decl: RuleDecl, spec: RuleCaseSpec): RuleCaseSpec[] {
  const out: RuleCaseSpec[] = [];
  for (const [name, h] of Object.entries(decl.hyper)) {
    if (h.kind !== "enum") continue;
    for (const v of h.values) if (v !== spec.hyper[name]) out.push({ ...spec, hyper: { ...spec.hyper, [name]: v } });
  }
  return out;
}

function logit(p: number): number {
  return Math.log(p / (1 - p));
}
function softplusInv(y: number): number {
  return Math.log(Math.expm1(y));
}


/**
 * Builds the tensors of a case. Scales keep every gradient well above rounding noise and the
 * recurrences in their stable range at every gate regime: each row of X has norm in [0.5, 1] and
 * the projections do not amplify (|W_ij| <= 1/sqrt(fan_in)), so an inner step theta·|k|^2 stays
 * below 1 even at d = 1, where a uniform draw has no averaging to keep it small.
 */
export function buildRuleCase(decl: RuleDecl, spec: RuleCaseSpec, dtype: DType = "f64", frozen = false): RuleCase {
  const cfg = withDefaults(decl, { d: spec.d, seq_len: spec.seq_len, ...spec.hyper });
  const rng = new Rng(spec.seed);
  const { d, seq_len: s } = cfg;
  const X = new Tensor(dtype, [s, d]);
  for (let t = 0; t < s; t++) {
    const row = Float64Array.from({ length: d }, () => rng.uniform(-1, 1));
    const norm = Math.hypot(...row) || 1;
    const r = rng.uniform(0.5, 1);
    for (let j = 0; j < d; j++) X.data[t * d + j] = (r * row[j]!) / norm;
  }
  const dy = uniformTensor(dtype, [s, d], rng, -1, 1);
  const shapes = paramShapes(decl, cfg);
  const params: Record<string, Tensor> = {};
  for (const name of paramNames(decl)) {
    const shape = shapes[name]!;
    const fanIn = shape[shape.length - 1]!;
    if (name.startsWith("W_")) params[name] = uniformTensor(dtype, shape, rng, -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn));
    else if (name.startsWith("w_")) params[name] = uniformTensor(dtype, shape, rng, -0.5 / Math.sqrt(fanIn), 0.5 / Math.sqrt(fanIn));
    else params[name] = new Tensor(dtype, shape);
  }
  // Gate biases put each gate in the requested regime; the w·c term moves it around that value.
  const theta = THETA_LEVELS[spec.theta] / Math.max(1, decl.thetaScale?.(cfg) ?? 1);
  const bias = { alpha: logit(ALPHA_LEVELS[spec.alpha]), theta: softplusInv(theta), eta: logit(0.6) };
  for (const g of ["alpha", "theta", "eta"] as const) {
    const b = params[`b_${g}`];
    if (b === undefined) continue;
    // a channel gate's biases span one logit either side of the regime's level across the key
    // channels, so that the channels decay differently (docs/spec/decisions.md#channel-gate-cases)
    const n = b.size;
    for (let j = 0; j < n; j++) b.data[j] = bias[g] + (n === 1 ? 0 : (2 * j) / (n - 1) - 1);
  }
  const state = spec.state === "init" ? decl.init(cfg, dtype) : decl.randomState(cfg, dtype, rng.next.bind(rng));
  // Upstream gradient in the units of y: from a small initial state (the MLP rules' D4 init is
  // ~1e-2) y is tiny, and so is every gradient against the absolute atol. The loss is linear in
  // dy and finite differences keep their relative accuracy, so dy is scaled up to |y| ~ 1.
  const y = frozen ? frozenForward(decl, X, params, state, cfg) : ruleForward(decl, X, params, state, cfg).y;
  const yMax = maxAbs(y.data);
  const up = yMax > 0 && yMax < 1 ? Math.min(1 / yMax, DY_SCALE_MAX) : 1;
  for (let i = 0; i < dy.size; i++) dy.data[i]! *= up;
  if (frozen) return { decl, cfg, X, params, state, dy };
  const dRng = new Rng((spec.seed ^ 0x2c1b3c6d) >>> 0);
  const dFinal: Record<string, Tensor> = {};
  for (const [n, shape] of Object.entries(decl.stateShapes(cfg))) dFinal[n] = uniformTensor(dtype, shape, dRng, -1, 1);
  return { decl, cfg, X, params, state, dy, dFinal };
}

/** Bound on the dy rescaling: a y below 1e-4 of unit scale is left small (and vacuous if it stays so). */
const DY_SCALE_MAX = 1e4;


/** The rule-level loss of conformance C2: sum(y ⊙ dy), untraced. */
export function ruleLoss(c: RuleCase, params: Params = c.params, state: State = c.state): number {
  const { y } = ruleForward(c.decl, c.X, params, state, c.cfg);
  let s = 0;
  for (let i = 0; i < y.size; i++) s += y.data[i]! * c.dy.data[i]!;
  return s;
}

/** A `--case` request: the fields of a RuleCaseSpec, all optional, plus `frozen`. */
export interface RuleCaseRequest {
  readonly spec: RuleCaseSpec;
  readonly frozen: boolean;
}

const REQUEST_KEYS = ["d", "seq_len", "seed", "hyper", "frozen", "state", "alpha", "theta"] as const;

/**
 * Reads a `--case` request strictly: every key known, every value of its type and range
 * (hyperparameters by the rule's declaration); the error names the field.
 */
export function parseRuleCaseRequest(decl: RuleDecl, raw: unknown, frozenDefault: boolean): RuleCaseRequest {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new Error("expected a JSON object");
  const req = raw as Record<string, unknown>;
  for (const k of Object.keys(req)) {
    if (!(REQUEST_KEYS as readonly string[]).includes(k)) throw new Error(`unknown field '${k}' (known: ${REQUEST_KEYS.join(", ")})`);
  }
  const int = (name: string, dflt: number, min: number, max: number): number => {
    const v = req[name] ?? dflt;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) throw new Error(`${name}: expected an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
    return v;
  };
  const oneOf = <T extends string>(name: string, dflt: T, values: readonly T[]): T => {
    const v = req[name] ?? dflt;
    if (typeof v !== "string" || !(values as readonly string[]).includes(v)) throw new Error(`${name}: expected one of ${values.map((x) => `"${x}"`).join(", ")}, got ${JSON.stringify(v)}`);
    return v as T;
  };
  const frozenRaw = req.frozen ?? frozenDefault;
  if (typeof frozenRaw !== "boolean") throw new Error(`frozen: expected true or false, got ${JSON.stringify(frozenRaw)}`);
  if (frozenRaw && decl.frozen === null) throw new Error(`frozen: ${decl.key} has no frozen read`);
  const d = int("d", 4, 1, 256), seq_len = int("seq_len", 3, 1, 4096);
  const hyperRaw = req.hyper ?? {};
  if (typeof hyperRaw !== "object" || hyperRaw === null || Array.isArray(hyperRaw)) throw new Error("hyper: expected an object of hyperparameters");
  const hyper: Record<string, number | string> = {};
  for (const [name, v] of Object.entries(hyperRaw as Record<string, unknown>)) {
    const h = decl.hyper[name];
    if (h === undefined) {
      const known = Object.keys(decl.hyper);
      throw new Error(`hyper.${name}: ${decl.key} has no such hyperparameter (${known.length > 0 ? `known: ${known.join(", ")}` : "it has none"})`);
    }
    if (h.kind === "enum") {
      if (typeof v !== "string" || !h.values.includes(v)) throw new Error(`hyper.${name}: expected one of ${h.values.join(", ")}, got ${JSON.stringify(v)}`);
    } else if (typeof v !== "number" || !Number.isFinite(v) || v < h.min || v > h.max || (h.kind === "int" && !Number.isInteger(v))) {
      throw new Error(`hyper.${name}: expected ${h.kind === "int" ? "an integer" : "a number"} in [${h.min}, ${h.max}], got ${JSON.stringify(v)}`);
    }
    hyper[name] = v;
  }
  const spec = clampHyper(decl, {
    d, seq_len, hyper,
    alpha: oneOf("alpha", "mid", Object.keys(ALPHA_LEVELS) as (keyof typeof ALPHA_LEVELS)[]),
    theta: oneOf("theta", "small", Object.keys(THETA_LEVELS) as (keyof typeof THETA_LEVELS)[]),
    state: oneOf("state", frozenRaw ? "random" : "init", ["init", "random"] as const),
    seed: int("seed", 1, 0, 0x7fffffff),
  });
  return { spec, frozen: frozenRaw };
}
