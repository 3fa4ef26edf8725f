/** Replaying the golden model fixtures through the torch bridge. */
import { Tensor } from "../../src/tensor.ts";
import { TorchBridge } from "../../oracle/torch-bridge.ts";
import { diff, scalar, withFloor, type Diff } from "./compare.ts";

type JsonT = { shape: number[]; data: number[] };

function fromJson(j: JsonT): Tensor {
  return new Tensor("f64", j.shape, Float64Array.from(j.data));
}

function recFromJson(r: Record<string, JsonT> | undefined): Record<string, Tensor> {
  return Object.fromEntries(Object.entries(r ?? {}).map(([n, t]) => [n, fromJson(t)]));
}

const MODEL_CONFIG_KEYS = ["d", "seq_len", "vocab", "heads", "window", "freq_schedule", "freq_threshold", "persistent"];

/** Replays an nlc-fixture/1 file through the bridge; null for a file it does not replay (f32). */
export async function replayFixture(br: TorchBridge, doc: any): Promise<{ diffs: Diff[]; activeMatch: boolean } | null> {
  if (doc.dtype !== "f64") return null;
  const ex = doc.expected;
  const diffs: Diff[] = [];
  if (doc.target.kind === "rule") {
    const t = await br.runRule({
      rule: doc.target.rule, frozen: doc.target.frozen, config: doc.config, X: fromJson(doc.inputs.X), dy: fromJson(doc.inputs.dy),
      params: recFromJson(doc.inputs.params), state: doc.inputs.state === undefined ? undefined : recFromJson(doc.inputs.state),
    });
    diffs.push(diff("y", t.y, fromJson(ex.y)));
    for (const [n, v] of Object.entries(recFromJson(ex.state))) diffs.push(diff(`state.${n}`, t.state[n], v));
    for (const [n, v] of Object.entries(recFromJson(ex.grads))) diffs.push(diff(`grads.${n}`, t.grads[n], v));
    return { diffs: withFloor(diffs), activeMatch: true };
  }
  const cfg = doc.config;
  const hyper = Object.fromEntries(Object.entries(cfg).filter(([n]) => !MODEL_CONFIG_KEYS.includes(n))) as Record<string, number | string>;
  const t = await br.runModel({
    composition: doc.target.composition,
    config: {
      d: cfg.d, seq_len: cfg.seq_len, vocab: cfg.vocab, heads: cfg.heads, window: cfg.window, freq_schedule: cfg.freq_schedule, freq_threshold: cfg.freq_threshold,
      ...(cfg.persistent === undefined ? {} : { persistent: cfg.persistent }),
    },
    levels: Array.from({ length: doc.target.k }, () => ({ rule: doc.target.rule, hyper })),
    chunkSizes: doc.target.chunk_sizes, active: doc.target.active,
    ids: doc.inputs.input_ids, targets: doc.inputs.target_ids,
    params: { model: recFromJson(doc.inputs.params.model), levels: doc.inputs.params.levels.map((r: any) => recFromJson(r)) },
    context: doc.inputs.context?.map((r: any) => recFromJson(r)),
  });
  diffs.push(diff("loss", scalar(t.loss), ex.loss as number));
  for (const [n, v] of Object.entries(recFromJson(ex.grads.model))) diffs.push(diff(`grads.model.${n}`, t.grads.model[n], v));
  ex.grads.levels.forEach((r: any, l: number) => {
    for (const [n, v] of Object.entries(recFromJson(r))) diffs.push(diff(`grads.levels.${l}.${n}`, t.grads.levels[l]![n], v));
  });
  (ex.error_buffers ?? []).forEach((r: any, l: number) => {
    for (const [n, v] of Object.entries(recFromJson(r))) diffs.push(diff(`error_buffers.${l}.${n}`, t.errorBuffers[l]![n], v));
  });
  const want = doc.target.active as boolean[];
  return { diffs: withFloor(diffs), activeMatch: want.every((a, l) => a === t.active[l]) };
}
