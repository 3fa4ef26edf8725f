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
}
