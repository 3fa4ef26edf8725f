/**
 * The configurations a kernel check judges and reports (details.configurations, the limit
 * NLC_KERNEL_CONFIGS=first): a py: kernel's autotune configurations
 * (docs/spec/py-backend.md#configurations) and a native library's pair variants
 * (docs/spec/kernel-abi.md#variants) are tallied and limited alike.
 */
import type { CaseOutcome } from "./check.ts";
import { environment, type Environment } from "../environment.ts";

/** Which configurations a check judges: every one (the default) or the default only. */
export type ConfigLimit = "all" | "first";

export const CONFIG_LIMIT_ENV = "NLC_KERNEL_CONFIGS";

/** The name the default configuration goes by in details and messages. */
export const DEFAULT_CONFIGURATION = "default";

/**
 * NLC_KERNEL_CONFIGS: "all" (or unset) or "first"; anything else is an error naming the variable.
 * NLC_FLA_FIRST_CONFIG, which it replaces, is an error saying so where NLC_KERNEL_CONFIGS is unset
 * (ignored, it would judge more than its setter asked for, and without a word).
 */
export function configLimit(env: Environment = environment()): ConfigLimit {
  if (env.NLC_FLA_FIRST_CONFIG !== undefined && env[CONFIG_LIMIT_ENV] === undefined) {
    throw new Error(`NLC_FLA_FIRST_CONFIG is replaced by ${CONFIG_LIMIT_ENV}=first (or =all: every configuration, the default); ` +
      "unset it (docs/spec/py-backend.md#configurations)");
  }
  const v = (env[CONFIG_LIMIT_ENV] ?? "").trim();
  if (v === "" || v === "all") return "all";
  if (v === "first") return "first";
  throw new Error(`${CONFIG_LIMIT_ENV}=${JSON.stringify(v)}: expected "all" (every configuration judged, the default) or "first" (the default configuration only)`);
}

/** What a py: check's details.configurations say where no call reached an autotuned kernel. */
export const NO_AUTOTUNED = "no autotuned kernel was reached: the default is the one configuration";

/** One configuration's share of a check: its cases and its kernel calls' time. */
interface Judged {
  cases: number;
  ms: number;
}

/** The configurations one check judged and did not judge, for its details and message. */
export class ConfigTally {
  private readonly judged = new Map<string, Judged>();
  private readonly notJudged = new Set<string>();
  /** Configurations not run because the interpreter computes them as an earlier one (launch options only), most in one case. */
  private same = 0;
  /** The most autotuned kernels one call reached, or null where no call said (declared configurations, a native pair). */
  private autotuned: number | null = null;

  /** `noun`: what the check's message calls them ("configurations"; a native pair's "variants"). */
  constructor(readonly limit: ConfigLimit = configLimit(), private readonly noun = "configurations") {}

  add(name: string, ms: number): void {
    const j = this.judged.get(name) ?? { cases: 0, ms: 0 };
    j.cases++;
    j.ms += ms;
    this.judged.set(name, j);
  }

  reached(names: readonly string[], same: number, autotuned: number | null = null): void {
    if (this.limit === "first") for (const n of names) this.notJudged.add(n);
    this.same = Math.max(this.same, same);
    if (autotuned !== null) this.autotuned = Math.max(this.autotuned ?? 0, autotuned);
  }

  /**
   * details.configurations, or undefined for a kernel with one configuration; where the calls said
   * they reached no autotuned kernel, that (none to judge, told apart from not looked at).
   */
  details(): Readonly<Record<string, unknown>> | undefined {
    if (this.judged.size <= 1 && this.notJudged.size === 0 && this.same === 0) return this.autotuned === 0 ? { autotuned: NO_AUTOTUNED } : undefined;
    const round = (x: number) => Math.round(x * 10) / 10;
    return {
      limit: this.limit,
      judged: [...this.judged].map(([name, j]) => ({ name, cases: j.cases, ms: round(j.ms) })),
      not_judged: [...this.notJudged],
      ...(this.same > 0 ? { same_computation: this.same } : {}),
    };
  }

  /** What the check's message says of its configurations when not every one was judged. */
  note(): string | null {
    if (this.notJudged.size > 0) {
      return `${this.judged.size} of ${this.judged.size + this.notJudged.size} ${this.noun} judged ` +
        `(${CONFIG_LIMIT_ENV}=first: the others are listed in details.configurations.not_judged)`;
    }
    if (this.same > 0) {
      return `${this.judged.size} configurations judged; ${this.same} more differ from a judged one in launch options only, ` +
        "which Triton's interpreter does not model (docs/spec/py-backend.md#configurations)";
    }
    return null;
  }
}

/** A case judged under one configuration, and the time its kernel call took. */
export interface Judgement {
  readonly outcome: CaseOutcome;
  readonly kernelMs: number;
}
