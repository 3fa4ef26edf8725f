/**
 * Every configuration of a py: kernel judged (docs/spec/py-backend.md#configurations): each case
 * runs under the kernel's default (every autotuned Triton kernel at its first configuration, or the
 * first configuration a Python kernel declares), then once under each other configuration the
 * host's reply lists (python/nlc_torch/configurations.py), each judged as the default is. A case
 * fails under the first configuration that fails, and the message names it. The check's
 * details.configurations name every configuration judged, with its cases and time; a limit
 * (NLC_KERNEL_CONFIGS=first) is stated there and in the message, never silent.
 */
import type { CaseOutcome } from "../../harness/check.ts";
import { DEFAULT_CONFIGURATION, type ConfigTally, type Judgement } from "../../harness/configurations.ts";

export {
  CONFIG_LIMIT_ENV, ConfigTally, DEFAULT_CONFIGURATION, configLimit, type ConfigLimit, type Judgement,
} from "../../harness/configurations.ts";

/**
 * A case under every configuration: `judge(null)` (the default) first, then each configuration the
 * host listed after that call (`lastReply().configurations`), up to the first that fails. The
 * default goes by the name the reply gives it (`configuration`), else DEFAULT_CONFIGURATION.
 */
export async function acrossConfigurations(tally: ConfigTally, lastReply: () => Readonly<Record<string, unknown>>,
  judge: (configuration: string | null) => Promise<Judgement>): Promise<CaseOutcome> {
  const { outcome: first, kernelMs } = await judge(null);
  const reply = lastReply();
  const base = typeof reply.configuration === "string" ? reply.configuration : DEFAULT_CONFIGURATION;
  tally.add(base, kernelMs);
  const names = Array.isArray(reply.configurations) ? reply.configurations.filter((n): n is string => typeof n === "string") : [];
  tally.reached(names, typeof reply.configurations_same === "number" ? reply.configurations_same : 0);
  const named = (o: CaseOutcome, name: string): CaseOutcome =>
    ({ ...o, message: `configuration ${name}: ${o.message ?? "failed"}`, details: { ...(o.details ?? {}), configuration: name } });
  if (names.length === 0) return first;
  if (!first.ok) return first.vacuous === true ? first : named(first, base);
  if (tally.limit === "first") return first;
  for (const name of names) {
    const { outcome: o, kernelMs: ms } = await judge(name);
    tally.add(name, ms);
    if (!o.ok && o.vacuous !== true) return named(o, name);
  }
  return first;
}
