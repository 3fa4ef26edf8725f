/**
 * Saturated gates (docs/spec/py-backend.md#edges, docs/spec/conformance.md#regime): the values of the
 * declared saturated case, one definition for the py: and the native kernel checks. A case of
 * B·H sequences puts sequence n at one corner of (α, θ): α → 1 for even n, α → 0 for odd n; θ → 1
 * for n mod 4 < 2, else θ → 0.
 */
import type { RuleConfig, RuleDecl } from "../src/rules/types.ts";

/** The tokens past the last full chunk in the saturated case: 3, so that three gates of −30 or below sum past f32's exp range (e^88.7). */
export const SATURATED_TAIL = 3;
/** A gate in log space at α → 1 (a kernel that takes log gates): drawn uniformly from this range per token and channel. */
export const SATURATED_LOG_GATE: readonly [number, number] = [-80, -30];
/**
 * θ at its corners: 2^-14 (θ → 0) and 1 − 2^-8 (θ → 1), exact in f32, bf16 and f16 and strictly
 * inside (0, 1) as a bounded step size must be; a rule that scales its step size down (thetaScale)
 * gets θ → 1 divided by that scale, the top of its own range.
 */
export const SATURATED_THETA = { low: 2 ** -14, high: 1 - 2 ** -8 } as const;

/** The gates a saturated case sets: the retention gate and the step size (others stay as generated). */
export const SATURATED_GATES = ["alpha", "theta"] as const;

/** Whether sequence n of the saturated case has α → 1 and θ → 1. */
export const saturatedCorner = (n: number): { alphaHigh: boolean; thetaHigh: boolean } => ({ alphaHigh: n % 2 === 0, thetaHigh: n % 4 < 2 });

/** θ → 1 for a rule: 1 − 2^-8 divided by the rule's step-size scale (before rounding to a dtype). */
export const saturatedThetaTop = (decl: RuleDecl, cfg: RuleConfig): number => SATURATED_THETA.high / Math.max(1, decl.thetaScale?.(cfg) ?? 1);

/** How a message names the saturated case. */
export const SATURATED_LABEL = "saturated gates (sequence n: alpha -> 1 for even n, 0 for odd n; theta -> 1 for n mod 4 < 2, else -> 0)";
