/**
 * What a run's catalogue is built from (docs/spec/decisions.md#settings-argument): made once, at
 * start-up, by the plan (plan.ts `catalogueSettings`) from the command line, the config file and the
 * environment record, then passed as an argument — to the catalogue (catalogue.ts `buildCatalogue`),
 * to each backend kind's checks and report rows (backend-kinds.ts), and, as data, to every worker
 * thread in its job. Nothing writes the environment record after start-up
 * (tests/settings-environment.test.ts).
 */
import type { ConfigLimit } from "../harness/configurations.ts";

export interface CatalogueSettings {
  /**
   * Every kernel backend the run configures, `ref` aside, each once, in the order given
   * (--backend, the config file's `backends`, else each kind's environment variable with its
   * default); each kind takes its own (backend-kinds.ts).
   */
  readonly backends: readonly string[];
  /** Whether the run named `ref`: the report lists it then only (it is the oracle, not a backend under test). */
  readonly namesReference: boolean;
  /** Extra fixture directories (C6), besides fixtures/. */
  readonly fixtureDirs: readonly string[];
  /** Which configurations (a native pair's variants) a kernel check judges (NLC_KERNEL_CONFIGS, harness/configurations.ts). */
  readonly configLimit: ConfigLimit;
}
