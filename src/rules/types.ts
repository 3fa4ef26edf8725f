/**
 * The shape of a rule declaration. Each memory rule (and SWA) is declared once as a
 * RuleDecl; the generic level machinery (level.ts) and every check are derived from it.
 *
 * A rule is split like a kernel pair: the projections and gates (shared, level.ts) stay
 * outside, and the rule's `inner` pair is the recurrence over per-token k, v, q, x and gates.
 */
import type { DType, Tensor } from "../tensor.ts";

export type GateName = "alpha" | "theta" | "eta";

/**
 * A gate's shape per token: "token" is one value per token ([s], the default), "channel" one per
 * channel ([s, d]: KDA's decay per key channel, docs/spec/titans-family.md#kda; a rule's sheet says
 * which channels, e.g. GDN2's write gate and gated Oja's decay are per value channel,
 * docs/spec/delta-family-2.md). A channel gate's parameters
 * are w_<g> [d, 2d] and b_<g> [d] instead of [2d] and [1]; its kernel tensor is [B, T, H, d].
 */
export type GateShape = "token" | "channel";

/** The shape of gate g in a declaration (docs/spec/names.md#level-params). */
export function gateShape(decl: Pick<RuleDecl, "channelGates">, g: GateName): GateShape {
  return decl.channelGates?.includes(g) ? "channel" : "token";
}

/** Rule configuration: `d`, `seq_len` and the rule's own hyperparameters (canonical names). */
export interface RuleConfig {
  readonly d: number;
  readonly seq_len: number;
  readonly [name: string]: number | string;
}

/**
 * A hyperparameter: [min, max] is what the rule accepts (inputs outside are rejected); `sample`,
 * when given, is the narrower range the checks generate from (e.g. where the inner recurrence is
 * stable at the generated gate levels and f64 finite differences are well conditioned).
 */
export type HyperSpec =
  | {
    readonly kind: "int"; readonly default: number; readonly min: number; readonly max: number; readonly doc: string;
    readonly sample?: readonly [number, number];
    /** A bound by the model width d: at most d (Trellis' d_compress), or a divisor of d (SWA heads). */
    readonly boundByD?: "at-most" | "divides";
  }
  | {
    readonly kind: "real"; readonly default: number; readonly min: number; readonly max: number; readonly doc: string;
    readonly sample?: readonly [number, number];
    /** Values with their own code path (e.g. Moneta's p = 1, p = 2 fast paths) that inputs must hit. */
    readonly atoms?: readonly number[];
    /**
     * The range generated cases keep to at a thousand tokens and more (the regime profile's `long`
     * batch), where the rule's recurrence is ill-conditioned outside it; the reason beside it.
     */
    readonly longSample?: readonly [number, number];
  }
  | { readonly kind: "enum"; readonly default: string; readonly values: readonly string[]; readonly doc: string };

export type Named<K extends string> = { readonly [P in K]: Tensor };
export type State = Readonly<Record<string, Tensor>>;

/** The names of an inner recurrence's per-token inputs, in ABI order (InnerInputs' keys). */
export const INNER_INPUT_NAMES = ["k", "v", "q", "x", "p", "a", "b", "alpha", "theta", "eta", "omega"] as const;

/**
 * Per-token vectors beyond k, v, q that a rule projects from X (`auxInputs`): Comba's second key p,
 * DPLR's a and b. Each has its projection W_<P|A|B> [d, d] and is L2-normalised when k is.
 */
export const AUX_INPUT_NAMES = ["p", "a", "b"] as const;
export type AuxInputName = (typeof AUX_INPUT_NAMES)[number];

/** The projection of an auxiliary input: W_P, W_A, W_B. */
export const auxParam = (n: AuxInputName): string => `W_${n.toUpperCase()}`;

/**
 * Per-token inputs of an inner recurrence (all [s, d] or [s]; a channel gate is [s, d]); gates
 * present iff the rule declares them.
 */
export interface InnerInputs {
  readonly k: Tensor;
  readonly v: Tensor;
  readonly q: Tensor;
  /** The level input row itself (Trellis reads it directly). */
  readonly x: Tensor;
  /** Comba (auxInputs): the second key p_t = X W_Pᵀ the correction reads the state with, [s, d]. */
  readonly p?: Tensor;
  /** DPLR (auxInputs): the low-rank transition's vectors, a_t = X W_Aᵀ and b_t = X W_Bᵀ, [s, d]. */
  readonly a?: Tensor;
  readonly b?: Tensor;
  readonly alpha?: Tensor;
  readonly theta?: Tensor;
  readonly eta?: Tensor;
  /** Atlas: omega_t = W_omega silu([k_t; v_t]), [s, d]. */
  readonly omega?: Tensor;
}

/**
 * A rule's long-regime input shaper (RuleDecl.longInputs): maps the inner inputs the generator drew
 * for one sequence to inputs whose per-token transition has operator norm at most 1 − m_t/2, with m_t
 * the margin the gates leave (the rule's math sheet derives the bound).
 */
export interface LongInputs {
  /** What the shaped inputs keep, in words (the rule's sheet has the derivation). */
  readonly contract: string;
  shape(inputs: InnerInputs, cfg: RuleConfig): InnerInputs;
}

/** Gradients of the inner recurrence w.r.t. its per-token inputs. Absent = zero. */
export interface InnerGrads {
  dk?: Tensor;
  dv?: Tensor;
  dq?: Tensor;
  dx?: Tensor;
  dp?: Tensor;
  da?: Tensor;
  db?: Tensor;
  dalpha?: Tensor;
  dtheta?: Tensor;
  deta?: Tensor;
  domega?: Tensor;
  /**
   * ∂L/∂(initial state), keyed by the rule's state names (stateShapes; derived names such as
   * Moneta's A1/A2 are not state). The reference pairs always return every name
   * (docs/spec/state-gradients.md#active).
   */
  dState0?: Record<string, Tensor>;
}

export interface InnerPair<S extends string> {
  /**
   * Names of the tensors forward saves for backward, beyond its inputs (which the level keeps
   * and hands back): declared here, once.
   */
  readonly saved: readonly S[];
  forward(inp: InnerInputs, state: State, cfg: RuleConfig): { y: Tensor; finalState: State; saved: Named<S> };
  /**
   * `dFinal` is ∂L/∂(final state) keyed like the state; absent, or a missing name, is zero
   * (docs/spec/state-gradients.md#conventions).
   */
  backward(saved: Named<S>, inp: InnerInputs, dy: Tensor, cfg: RuleConfig, dFinal?: State): InnerGrads;
}

/** A frozen (read-only) read of the rule's state by a query q = X W_Q^T, and its own VJP (D3). */
export interface FrozenPair<S extends string> {
  readonly saved: readonly S[];
  forward(q: Tensor, state: State, cfg: RuleConfig): { y: Tensor; saved: Named<S> };
  /** dState: ∂L/∂(the state read), keyed by the read's state names (docs/spec/state-gradients.md#frozen). */
  backward(saved: Named<S>, q: Tensor, dy: Tensor, cfg: RuleConfig): { dq: Tensor; dState: Record<string, Tensor> };
}

/** A C8 invariant: returns null when it holds, or a message saying what broke. */
export interface Invariant {
  readonly name: string;
  /** The sheet text it enforces, e.g. "docs/spec/titans-family.md#delta-tests write_read". */
  readonly spec: string;
  check(dtype: DType, seed: number): string | null;
}

/** Input-generation hints for the checks (e.g. MEMORA states live on the simplex). */
export interface StateSampler {
  (cfg: RuleConfig, dtype: DType, rnd: () => number): Record<string, Tensor>;
}

/**
 * Smallest sizes at which every gradient of the rule is informative. Below them some gradient is
 * identically zero by the math (e.g. a 1-d L2-normalised key is the constant ±1; a read-before-write
 * rule's first token never sees a write), so a check there could only be vacuous.
 */
export interface CheckMinimums {
  readonly d?: number;
  readonly seq_len?: number;
  /** Per integer hyperparameter, e.g. { m_slots: 2 }. */
  readonly hyper?: Readonly<Record<string, number>>;
}

/**
 * How a matrix-memory rule's step splits for the chunk forms (docs/spec/chunk-forms.md#matrix-family):
 *   u_t     the write direction: "error" e_t = M k_t − v_t (depends on the state: the rule's
 *           inner gradient), or the state-free "v" (v_t) or "omega" (ω_t)
 *   W_t = c_t u_t k_tᵀ with c_t = −θ_t ("error", "omega") or 1 ("v")
 *   momentum: S_{t+1} = η_t S_t + W_t ; M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   else:     M_{t+1} = (1 − α_t) M_t + W_t ;   read y_t = M_{t+1} q_t
 */
export interface MatrixChunkDecl {
  readonly write: "error" | "v" | "omega";
  readonly momentum: boolean;
}

/** A rule declaration; K is its key (lower-case, as used in ids, flags, reports and fixture files). */
export interface RuleDecl<K extends string = string> {
  readonly key: K;
  /** Where the math is written down. */
  readonly sheet: string;
  /** Hyperparameters beyond d and seq_len, with defaults and valid ranges. */
  readonly hyper: Readonly<Record<string, HyperSpec>>;
  /** Which projections feed the inner pair: memory levels (W_K, W_V, W_Q + gates) or attention (W_q, W_k, W_v). */
  readonly projection: "memory" | "attention";
  readonly gates: readonly GateName[];
  /** The declared gates that are per channel ([s, d], gateShape; key or value channels, as the sheet says); absent = none. */
  readonly channelGates?: readonly GateName[];
  /** L2 row normalisation of k and q on the active path (Delta and Titans only, D1). */
  readonly normalizeKQ: boolean;
  /** Atlas: the inner pair receives omega = W_omega silu([k; v]). */
  readonly omega: boolean;
  /**
   * Per-token vectors beyond k, v, q the inner pair receives, each projected from X by its own
   * W_<name> [d, d] and L2-normalised when normalizeKQ: Comba's second key p
   * (docs/spec/titans-family.md#comba-params), DPLR's a and b (docs/spec/titans-family.md#dplr-params);
   * absent = none.
   */
  readonly auxInputs?: readonly AuxInputName[];
  stateShapes(cfg: RuleConfig): Record<string, number[]>;
  /** The rule's initial state (D4). */
  init(cfg: RuleConfig, dtype: DType): Record<string, Tensor>;
  /** A random valid state for the checks (random initial states are part of C1/C2). */
  randomState: StateSampler;
  readonly inner: InnerPair<string>;
  readonly frozen: FrozenPair<string> | null;
  readonly invariants: readonly Invariant[];
  readonly checkMinimums?: CheckMinimums;
  /**
   * Why the regime profile's `long` regime (T ≈ 1000) is not judged for this rule, with the measured
   * cause: a recurrence that is not contractive for the generated inputs grows past any precision over
   * a thousand tokens, so its kernels cannot be judged there (docs/spec/conformance.md#regime).
   * Absent: judged. The check's outcome names what was left out (details.regimes_not_judged).
   */
  readonly longRegime?: string;
  /**
   * How the regime profile's `long` regime (T ≈ 1000) draws this rule's inner inputs, for a recurrence
   * that is not contractive for independently drawn ones (Comba, DPLR): a shaper of the generated inputs
   * whose transition it keeps below norm 1 at every token (docs/spec/conformance.md#long-inputs).
   * Absent: the long regime draws inputs as every other regime does.
   */
  readonly longInputs?: LongInputs;
  /**
   * Per-token inputs the inner pair does not read under `cfg` (Lattice's encode variant writes k,
   * not v): their gradient is identically zero by the math, so the checks that differentiate each
   * inner input leave them out, as they leave out the gates a rule does not declare.
   */
  unread?(cfg: RuleConfig): readonly (typeof INNER_INPUT_NAMES)[number][];
  /**
   * State entries that restart at zero on every model step (Titans' and Atlas' momentum S, D7);
   * a level's context keeps the others (docs/spec/fixtures.md#rule-state).
   */
  readonly stepLocalState?: readonly string[];
  /**
   * Names a fixture may pass in `state` that the rule derives from its state inside every call
   * and so ignores (Moneta's A1/A2, YAAD's B1/B2).
   */
  readonly derivedState?: readonly string[];
  /**
   * The squared norm of what the rule's θ step multiplies, when it is not O(1): the checks divide
   * their θ levels by it so the generated inner steps stay stable (Trellis writes S_V with nsilu
   * codes of norm √dk, so its step is θ·dk).
   */
  readonly thetaScale?: (cfg: RuleConfig) => number;
  /** The matrix family's step split, for the chunk forms (absent: the rule is not in the family). */
  readonly matrixChunk?: MatrixChunkDecl;
  /** Kernel-ABI facts the fields above do not imply (docs/spec/kernel-abi.md#inputs); absent = none. */
  readonly kernel?: KernelFacts;
  /**
   * Inner inputs with several rows per token (Gated DeltaProduct's n_h keys, values and steps,
   * docs/spec/titans-family.md#gated-delta-product-level): absent = one row of every input per token.
   */
  readonly tokenRows?: TokenRows;
}

/**
 * Several rows per token of some inner inputs, their number the integer hyperparameter `hyper`
 * (docs/spec/decisions.md#delta-product-level). Each listed input is token-major: k, v [s, n·d] and
 * a token gate [s, n], row j of token t at t·n + j; so W_K, W_V are [n·d, d], each d-row of k is
 * normalised on its own, and a listed gate is computed per row from that row's [k; v]. The gates not
 * listed (one value per token) read the token's first row. Every other input keeps one row per token.
 */
export interface TokenRows {
  readonly hyper: string;
  readonly inputs: readonly ("k" | "v" | "theta")[];
}

/** Rows per token of inner input `name` under `cfg`: the declared count for a listed input, else 1. */
export function rowsOf(decl: Pick<RuleDecl, "tokenRows">, cfg: RuleConfig, name: string): number {
  const tr = decl.tokenRows;
  if (tr === undefined || !(tr.inputs as readonly string[]).includes(name)) return 1;
  const n = cfg[tr.hyper];
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1) throw new Error(`rows per token: hyperparameter ${tr.hyper} = ${String(n)}, expected a positive integer`);
  return n;
}

/**
 * What the kernel ABI generator (ffi/generate.ts) cannot derive from the rest of a declaration:
 * the inner inputs are k, v, q, `extraInputs`, the `auxInputs`, the declared gates and omega (when `omega`);
 * every input has a gradient except those in `noGrad`.
 */
export interface KernelFacts {
  readonly extraInputs?: readonly "x"[];
  readonly noGrad?: readonly ("k" | "v" | "q" | "x" | "p" | "a" | "b" | "alpha" | "theta" | "eta" | "omega")[];
}
