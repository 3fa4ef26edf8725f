/** The options of one cross-check run (conformance/c9/cross-check.ts), shared by its rule and model cases. */
export interface Options {
  cases: number;
  seed: number;
  large: boolean;
  extreme: boolean;
  rules: string[];
  doRules: boolean;
  doModel: boolean;
  doFixtures: boolean;
  verbose: boolean;
  tol: number;
  json: string | null;
  /**
   * What a run of the suite selected (`--select FILE`, written by conformance/c9/checks.ts): the
   * rule variants, the model case ids and whether the golden fixtures are replayed; null: all.
   */
  select: Selection | null;
  /** The golden fixtures replayed (`--golden DIR`); null: fixtures/golden. */
  golden: string | null;
}

export interface Selection {
  readonly rules: readonly string[];
  readonly model: readonly string[];
  readonly fixtures: boolean;
}
