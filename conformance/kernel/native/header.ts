/**
 * C5/abi/generated-files-current (docs/spec/kernel-abi.md#one-source): the per-rule part of
 * ffi/nlk.h, the table ffi/abi.gen.ts and the wrappers under cuda/gen/ are exactly what
 * ffi/generate.ts makes from the rule declarations now.
 */
import { staleFiles } from "../../../ffi/generate.ts";
import type { CaseOutcome } from "../../../harness/check.ts";

export function abiHeaderCheck(): CaseOutcome {
  const stale = staleFiles();
  if (stale.length > 0) return { ok: false, message: `stale generated files (regenerate with: bun ffi/generate.ts): ${stale.join(", ")}` };
  return { ok: true };
}
