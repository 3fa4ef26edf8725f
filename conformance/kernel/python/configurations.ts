/**
 * Every configuration of a py: kernel judged (docs/spec/py-backend.md#configurations): each case
 * runs under the kernel's default (every autotuned Triton kernel at its first configuration, or the
 * first configuration a Python kernel declares), then once under each other configuration the
 * host's reply lists (python/nlc_torch/configurations.py; listedConfigurations), each judged as the
 * default is (the loop is the case's own: python/definitions.ts). A case
 * fails under the first configuration that fails, and the message names it. The check's
 * details.configurations name every configuration judged, with its cases and time; a limit
 * (NLC_KERNEL_CONFIGS=first) is stated there and in the message, never silent.
 */
import type { CaseOutcome } from "../../../harness/check.ts";
import { DEFAULT_CONFIGURATION } from "../../../harness/configurations.ts";

/**
 * What the host's reply to a case's first call (the default) says of the configurations
 * (python/nlc_torch/configurations.py): the name the default goes by (`configuration`, else
 * DEFAULT_CONFIGURATION), the other configurations it lists, in the order they are judged, and how
 * many more compute as a listed one (launch options only).
 */
export function listedConfigurations(reply: Readonly<Record<string, unknown>>):
  { readonly base: string; readonly names: string[]; readonly same: number; readonly autotuned: number | null } {
  return {
    base: typeof reply.configuration === "string" ? reply.configuration : DEFAULT_CONFIGURATION,
    names: Array.isArray(reply.configurations) ? reply.configurations.filter((n): n is string => typeof n === "string") : [],
    same: typeof reply.configurations_same === "number" ? reply.configurations_same : 0,
    // how many autotuned Triton kernels the call reached; null where the kernel declares its configurations
    autotuned: typeof reply.autotuned === "number" ? reply.autotuned : null,
  };
}

/** A case's failure under a configuration, as the check reports it: the message and details name the configuration. */
export function underConfiguration(o: CaseOutcome, name: string): CaseOutcome {
  return { ...o, message: `configuration ${name}: ${o.message ?? "failed"}`, details: { ...(o.details ?? {}), configuration: name } };
}
