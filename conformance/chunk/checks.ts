/** The chunk-form checks (docs/spec/chunk-forms.md): recompute parity, chunk-start GD, exact chunked forms. */
import type { CheckDef } from "../../harness/check.ts";
import { chunkMatrixChecks } from "./forms.ts";
import { recomputeChecks } from "./recompute.ts";

export function chunkFormChecks(): CheckDef[] {
  return [...recomputeChecks(), ...chunkMatrixChecks()];
}
