/** The cross-check's MAG + CMS (and composition) model cases, run on both sides. */
import { cmsStep } from "../../oracle/cms-backward.ts";
import { buildModelCase, chunkSizesFor, smallModelSpec, type ModelCaseSpec } from "../../cases/model-case.ts";
import { pulseAt } from "../../src/model/conductor.ts";
import { COMPOSITIONS, DEFAULT_FREQ_THRESHOLD, type Composition, type MemoryRuleKey } from "../../src/model/config.ts";
import { contextKeys } from "../../src/model/context.ts";
import { tapeStep } from "../../src/model/step.ts";
import { MEMORY_RULES } from "../../src/rules/index.ts";
import { TorchBridge, type ModelReply } from "../../oracle/torch-bridge.ts";
import { diff, scalar, withFloor, type Diff } from "./compare.ts";
import type { Options } from "./options.ts";

interface ModelCaseResult {
  readonly id: string;
  readonly diffs: Diff[];
  readonly tapeDiffs: Diff[];
  readonly activeMatch: boolean;
  /** torch's active levels, e.g. "TTFF". */
  readonly pattern: string;
  readonly ms: number;
}


export interface ModelCaseDef {
  /** "<rule> …" for MAG; "<pattern> <rule> …" for MAC and MAL. */
  readonly id: string;
  readonly spec: ModelCaseSpec;
  readonly pulse: readonly boolean[];
  /** Learned gate: force level 1 on and level 2 off through b_freq (as the golden fixture does). */
  readonly pin?: boolean;
}

export function modelCases(o: Options): ModelCaseDef[] {
  return COMPOSITIONS.flatMap((comp) => compositionCases(o, comp));
}

/** The model cases of one composition: MAG's ids and seeds as before; MAC's and MAL's prefixed and seeded by pattern. */
function compositionCases(o: Options, comp: Composition): ModelCaseDef[] {
  const out: ModelCaseDef[] = [];
  const pre = comp === "mag" ? "" : `${comp} `;
  const over = comp === "mag" ? {} : { pattern: comp };
  const base = o.seed * 1000 + (comp === "mag" ? 0 : comp === "mac" ? 100_000 : 200_000);
  const rules = MEMORY_RULES.filter((r) => o.rules.length === 0 || o.rules.some((f) => r === f || `${r}.frozen` === f));
  rules.forEach((rule, i) => {
    const s = base + 10 * i;
    const spec = (k: number, seed: number, more: Partial<ModelCaseSpec> = {}) => smallModelSpec(rule, k, seed, { ...more, ...over });
    out.push({ id: `${pre}${rule} k1 all-active init`, spec: spec(1, s + 1, { context: "init" }), pulse: [true] });
    out.push({ id: `${pre}${rule} k2 all-active`, spec: spec(2, s + 2), pulse: [true, true] });
    out.push({ id: `${pre}${rule} k2 frozen-1`, spec: spec(2, s + 3), pulse: [true, false] });
    out.push({ id: `${pre}${rule} k4 all-active`, spec: spec(4, s + 4), pulse: [true, true, true, true] });
    out.push({ id: `${pre}${rule} k4 step-8`, spec: spec(4, s + 5), pulse: pulseAt(8, chunkSizesFor(4)).active });
    out.push({
      id: `${pre}${rule} k2 frozen-1 warm d6`, pulse: [true, false],
      spec: spec(2, s + 6, { d: 6, seq_len: 7, vocab: 11, heads: 3, window: 4, context: "warm" }),
    });
    const learned = { kind: "learned", threshold: DEFAULT_FREQ_THRESHOLD } as const;
    out.push({ id: `${pre}${rule} k4 learned`, spec: spec(4, s + 7, { freq: learned }), pulse: [true, true, true, true], pin: true });
    out.push({ id: `${pre}${rule} k2 learned`, spec: spec(2, s + 8, { freq: learned }), pulse: [true, true] });
  });
  if (o.rules.length === 0) {
    // Mixed levels (the model allows a rule per level).
    out.push({
      id: `${pre}mixed delta/moneta/lattice/trellis k4 step-8`, pulse: pulseAt(8, chunkSizesFor(4)).active,
      spec: { ...smallModelSpec("delta", 4, base + 999, over), levels: ["delta", "moneta", "lattice", "trellis"].map((r) => ({ rule: r as MemoryRuleKey, hyper: {} })) },
    });
  }
  return out;
}

export async function runModelCase(br: TorchBridge, def: ModelCaseDef): Promise<ModelCaseResult> {
  const c = buildModelCase(def.spec);
  if (def.pin) c.params.levels.forEach((rec, l) => { if (l === 1 || l === 2) rec.b_freq!.data[0] = l === 1 ? 2.5 : -2.5; });
  const ref = cmsStep(c.model, c.params, c.batch, def.pulse, c.context);
  const tape = tapeStep(c.model, c.params, c.batch, def.pulse, c.context);
  const spec = c.model.spec;
  const t: ModelReply = await br.runModel({
    composition: c.model.pattern,
    config: {
      d: spec.d, seq_len: spec.seq_len, vocab: spec.vocab, heads: spec.heads, window: spec.window,
      freq_schedule: spec.freq.kind, ...(spec.freq.kind === "learned" ? { freq_threshold: spec.freq.threshold } : {}),
      ...(c.model.pattern === "mac" ? { persistent: c.model.persistent } : {}),
    },
    levels: c.model.levels.map((lv) => {
      const { d: _d, seq_len: _s, ...hyper } = lv.cfg;
      return { rule: lv.decl.key, hyper };
    }),
    chunkSizes: spec.chunk_sizes,
    active: def.pulse,
    ids: c.batch.ids,
    targets: c.batch.targets,
    params: c.params,
    // From the init context (D4), none is sent: torch starts from its own init.
    context: def.spec.context === "init" ? undefined : c.context,
  });
  const compare = (r: typeof ref): Diff[] => {
    const ds: Diff[] = [diff("loss", scalar(t.loss), r.loss)];
    for (const [n, g] of Object.entries(r.grads.model)) ds.push(diff(`grads.model.${n}`, t.grads.model[n], g));
    r.grads.levels.forEach((rec, l) => {
      for (const [n, g] of Object.entries(rec)) ds.push(diff(`grads.levels.${l}.${n}`, t.grads.levels[l]![n], g));
    });
    r.buffers.forEach((rec, l) => {
      const tb = t.errorBuffers[l]!;
      for (const [n, g] of Object.entries(rec)) ds.push(diff(`error_buffers.${l}.${n}`, tb[n], g));
      for (const n of Object.keys(tb)) if (!(n in rec)) ds.push({ name: `error_buffers.${l}.${n}`, rel: Infinity, abs: Infinity, refMax: 0, note: "torch-only buffer" });
    });
    r.context.forEach((ctx, l) => {
      for (const n of contextKeys(c.model.levels[l]!)) ds.push(diff(`context.${l}.${n}`, t.context[l]![n], ctx[n]));
    });
    r.levelOutputs.forEach((y, l) => ds.push(diff(`level_outputs.${l}`, t.levelOutputs[l], y)));
    if (r.gates !== null) r.gates.forEach((g, l) => ds.push(diff(`gates.${l}`, scalar(t.gates?.[l] ?? NaN), g)));
    return withFloor(ds);
  };
  const activeMatch = ref.active.length === t.active.length && ref.active.every((a, l) => a === t.active[l]);
  const pattern = t.active.map((a) => (a ? "T" : "F")).join("");
  return { id: def.id, diffs: compare(ref), tapeDiffs: compare(tape), activeMatch, pattern, ms: t.ms };
}
