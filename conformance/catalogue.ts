/**
 * The catalogue: every check the suite runs, generated from the declarations (ops, rules,
 * backends, fixtures). Adding a rule to the registry adds its checks here without edits.
 */
import { variantKey } from "../src/rules/level.ts";
import { join } from "node:path";
import type { CheckDef, Handover } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import type { BackendInfo } from "../harness/report.ts";
import { c0OpChecks } from "./c0/ops.ts";
import { c0TapeChecks } from "./c0/tape.ts";
import { fixtureChecks } from "./c6/fixtures.ts";
import { c2ModelChecks } from "./c2/model.ts";
import { c3Checks } from "./c3/hand-written.ts";
import { c4Checks } from "./c4/traced.ts";
import { c7Checks } from "./c7/checks.ts";
import { c1Checks } from "./c1/opaque.ts";
import { c2RuleChecks } from "./c2/rule.ts";
import { c8Checks } from "./c8/invariants.ts";
import { c9Checks } from "./c9/checks.ts";
import { chunkFormChecks } from "./chunk/checks.ts";
import { KINDS } from "./backend-kinds.ts";
import type { CatalogueSettings } from "./catalogue-settings.ts";
import { c9Handover } from "./c9/checks.ts";

/**
 * The catalogue's generators, in catalogue order, by key: each makes its checks from the run's
 * settings. A worker thread builds only the generators of its job's checks (`generatorsOf`).
 */
const GENERATORS = {
  c0Ops: () => c0OpChecks(),
  c0Tape: () => c0TapeChecks(),
  c1: () => c1Checks(),
  c2Rule: () => c2RuleChecks(),
  c8: () => c8Checks(),
  c2Model: () => c2ModelChecks(),
  c3: () => c3Checks(),
  c4: () => c4Checks(),
  c7: () => c7Checks(),
  fixtures: (s) => fixtureChecks([join(ROOT, "fixtures"), ...s.fixtureDirs]),
  kernels: (s) => KINDS.flatMap((k) => k.checks(s)),
  c9: () => c9Checks(),
  chunkForms: () => chunkFormChecks(),
} as const satisfies Record<string, (settings: CatalogueSettings) => CheckDef<any>[]>;

/** A generator of the catalogue, as a worker job names it. */
export type GeneratorKey = keyof typeof GENERATORS;

const KEYS = Object.keys(GENERATORS) as GeneratorKey[];

export interface Catalogue {
  readonly checks: CheckDef<any>[];
  /**
   * The backends for the report, asked for after the checks ran: kernel backends are probed (and
   * built) only when a C5 check needs them.
   */
  backends(): BackendInfo[];
  /** The generators that made checks `ids`, in catalogue order: what a worker running them builds. */
  generatorsOf(ids: Iterable<string>): GeneratorKey[];
}

/**
 * Every check the run's settings give (catalogue-settings.ts, made once at start-up by the plan),
 * or those of the generators `only` (a worker thread's job).
 */
export function buildCatalogue(settings: CatalogueSettings, only?: readonly GeneratorKey[]): Catalogue {
  const checks: CheckDef<any>[] = [];
  const from = new Map<string, GeneratorKey>();
  for (const key of KEYS) {
    if (only !== undefined && !only.includes(key)) continue;
    for (const c of GENERATORS[key](settings)) {
      if (from.has(c.id)) throw new Error(`duplicate check id ${c.id}`);
      from.set(c.id, key);
      checks.push(c);
    }
  }
  const reference: BackendInfo[] = settings.namesReference ? [{ name: "ref", available: true }] : [];
  return {
    checks,
    backends: () => [...reference, ...KINDS.flatMap((k) => k.backends(settings))],
    generatorsOf: (ids) => {
      const keys = new Set<GeneratorKey>();
      for (const id of ids) {
        const key = from.get(id);
        if (key === undefined) throw new Error(`no check ${id} in the catalogue`);
        keys.add(key);
      }
      return KEYS.filter((k) => keys.has(k));
    },
  };
}

/** What the main thread learnt that worker threads adopt (harness/check.ts Handover): each backend kind's, and the check folders'. */
const HANDOVERS: readonly Handover[] = [...KINDS.flatMap((k) => (k.handover !== undefined ? [k.handover] : [])), c9Handover];

/** What this thread learnt, for a worker (`defs`: learn now what every worker running them needs). */
export function takeHandovers(defs?: readonly CheckDef[]): unknown[] {
  if (defs !== undefined) for (const h of HANDOVERS) h.prepare?.(defs);
  return HANDOVERS.map((h) => h.take());
}

/** A worker thread adopts what the thread that started it learnt, before it builds its catalogue. */
export function adoptHandovers(values: readonly unknown[]): void {
  HANDOVERS.forEach((h, i) => {
    if (values[i] !== undefined) h.adopt(values[i]);
  });
}

/** A filter that is a class name (C1, C10): it selects that class exactly, never a longer one. */
const CLASS_NAME = /^C\d+$/;

/**
 * `--filter`: a class (C2: that class alone, not C20), a rule key (moneta, moneta.frozen), or any
 * substring of a check id (C1/ selects C1's ids). Several filters are alternatives.
 */
export function matchesFilter(c: Pick<CheckDef<any>, "id" | "class" | "subject">, filters: readonly string[]): boolean {
  if (filters.length === 0) return true;
  return filters.some((f) =>
    c.class === f ||
    c.subject.rule === f ||
    (c.subject.rule !== undefined && variantKey(c.subject.rule, c.subject.frozen === true) === f) ||
    (!CLASS_NAME.test(f) && c.id.includes(f)));
}
