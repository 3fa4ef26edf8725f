/**
 * The two Python processes of a py: backend run: the kernel host (the kernel under test, which
 * may die, hang or misbehave: per-request timeout, restarted on the next request) and the
 * reference bridge (the yardstick: a plain run of the PyTorch reference at the kernel's precision,
 * docs/spec/py-backend.md#reference, #precision). Both speak python/PROTOCOL.md through
 * oracle/torch-bridge.ts.
 */
import { edgeScaleValue } from "./edges.ts";
import { readFileSync } from "node:fs";
import { TorchBridge, TorchBridgeError } from "../../../oracle/torch-bridge.ts";
import { roundedCopy, type Precision, type StorageDType } from "../../../src/precision.ts";
import { Tensor } from "../../../src/tensor.ts";
import { F32_STORE_F64_ACC } from "../../../oracle/kernel-judge.ts";
import { lengthGroups, seqState, seqTokens, stateLead, statesTensor, toKernelGrads, tokensTensor, type PyCase } from "./canonical-case.ts";
import { NO_CONVENTIONS, type Conventions } from "./conventions.ts";
import { emptySeq, entries, isStateTensor, kernelLabel, nameOf, setAt, tensorName, type KernelNames, type TensorKey, type TensorNaming } from "../../../cases/kernel-tensors.ts";
import { plainYardstickOf } from "../../../oracle/plain-reference.ts";
import type { SeqTensors } from "../../../oracle/kernel-case.ts";
import type { PyBackend } from "./plan.ts";
import type { Toolchain } from "../../../ffi/toolchain.ts";
import { guardRequest, HAZARD_PLAN, probeRuns, type GuardedRun, type Hazard, type Poisoned } from "../../../ffi/hazards.ts";
import { environment } from "../../../environment.ts";
import { SubjectBroken } from "../../../harness/check.ts";

/** What the kernel declares (kernel_load's reply). */
export interface KernelInfo {
  kernel: string;
  rules: string[];
  dtype: string;
  /** The dtype of the initial and final state (and their gradients); "f32" unless declared. */
  state_dtype: StorageDType;
  layout: string;
  state_layout: string;
  /** "none": the kernel declares it is forward-only (`nlc['forward_only']`), so its backward checks are skipped with that reason. */
  backward: "explicit" | "autograd" | "none";
  device: string;
  judged: boolean;
  /** The chunk sizes the kernel declares (`nlc.chunk_size`), or null (docs/spec/py-backend.md#chunk-size). */
  chunk_sizes?: number[] | null;
  skip_reason: string | null;
  torch: string;
  /** The keyword the kernel takes packed sequences' offsets under (`nlc.varlen`), or null (docs/spec/py-backend.md#packed). */
  varlen?: string | null;
  /** The declared conventions (docs/spec/py-backend.md#conventions). */
  conventions: Conventions;
  /** What runs the kernel (docs/spec/conformance.md#toolchain). */
  toolchain?: Toolchain;
  /** A kernel whose two runs of a case may differ declares by how much (docs/spec/hazards.md#determinism); null: bitwise. */
  nondeterministic?: { tolerance: number } | null;
  /** Triton imported by the kernel's module, with its interpreter on (docs/spec/py-backend.md#triton-cpu). */
  interpreted?: boolean;
  /** The configurations the kernel declares (`nlc.configurations`, the first its default), or null (docs/spec/py-backend.md#configurations). */
  configurations?: string[] | null;
}

/** A kernel request's answer: its tensors and what the hazard probes saw (docs/spec/hazards.md). */
export interface KernelReply {
  tensors: Out;
  hazards: Hazard[];
  /** The largest relative difference between the two runs (a kernel declaring a tolerance). */
  rerunMaxRel?: number;
  /** The runs of the call the host answered (the judged one, the probes'). */
  runs: number;
}

/** A kernel request failed: the kernel raised, broke its contract, died or timed out (the check ends at that case: harness/run.ts). */
export class KernelFault extends SubjectBroken {
  constructor(readonly kind: string, message: string) {
    super(message);
    this.name = "KernelFault";
  }
}

/**
 * Per-request time limit of the kernel host: NLC_PY_KERNEL_TIMEOUT seconds, default 60; a kernel
 * interpreted by Triton on a CPU, INTERPRETED_TIMEOUT_S unless NLC_PY_KERNEL_TIMEOUT says otherwise
 * (docs/spec/py-backend.md#triton-cpu).
 */
export function kernelTimeoutMs(interpreted = false): number {
  const s = Number(environment().NLC_PY_KERNEL_TIMEOUT);
  return Number.isFinite(s) && s > 0 ? s * 1000 : interpreted ? INTERPRETED_TIMEOUT_S * 1000 : 60_000;
}

/** The default per-request limit of an interpreted Triton kernel, seconds (docs/spec/py-backend.md#triton-cpu). */
export const INTERPRETED_TIMEOUT_S = 900;

/**
 * Whether a backend's module may run Triton kernels, before it is loaded: a file module whose
 * source names triton or fla, or a package (not read). Its load (importing Triton and fla alone
 * took over 60 s on the loaded 2-core machine) and its child process get the interpreted limit.
 */
export function mayRunTriton(b: Pick<PyBackend, "module">): boolean {
  if (!/\.py$|\//.test(b.module)) return true;
  try {
    return /\b(triton|fla)\b/.test(readFileSync(b.module, "utf8"));
  } catch {
    return false;
  }
}

/** Where the kernel timeout comes from, as a message names it: `NLC_PY_KERNEL_TIMEOUT=60 s (default)`. */
export function kernelTimeoutSetting(interpreted = false): string {
  return `NLC_PY_KERNEL_TIMEOUT=${kernelTimeoutMs(interpreted) / 1000} s${environment().NLC_PY_KERNEL_TIMEOUT === undefined ? ` (default${interpreted ? " for a Triton module" : ""})` : ""}`;
}

export type Out = Map<string, Tensor>;

/** One kernel request as sent and its reply (python/PROTOCOL.md names). */
export interface Exchange {
  readonly op: string;
  readonly sent: readonly [string, Tensor][];
  readonly got: Out;
}

/** The `intermediates` of an `inner` request (python/PROTOCOL.md): stored values held in `dtype`, rounded to nearest or stochastically from a seed. */
export interface StoredIntermediates {
  readonly dtype: "bf16" | "f16";
  readonly rounding: "nearest" | number;
  /** The rule in its exact chunked form, in chunks of this many tokens (docs/spec/precision.md#intermediates-chunked). */
  readonly chunk?: number;
}

/** The rules the torch reference has a chunked stored form of (python/nlc_torch/chunk_stored.py, CHUNKED_RULES). */
export const CHUNKED_STORED_RULES: readonly string[] = ["delta", "gated_delta"];

/** Stochastic-rounding runs of the storage-intermediates yardstick, besides the one to nearest (measured choice: docs/spec/precision.md#intermediates). */
export const STORAGE_RANDOM_RUNS = 16;

/**
 * The precision a judged kernel is held to (docs/spec/py-backend.md#precision): storage = its
 * dtype, state = its state_dtype, sums in f32. PyTorch and Triton sum f32 tensors in f32 (matmul,
 * sum, a chunked form's products), so an f32 kernel too is judged as summing in f32 unless it
 * declares `"accumulate": "f64"` (docs/spec/precision.md#default-accumulate): a correct chunked
 * f32 kernel was 1.8x over the f64-sum floor on dα at seeds 1-3. An f32 kernel whose products run
 * in TF32 (a GPU's tensor cores) declares `"accumulate": "tf32"` (docs/spec/precision.md#tf32).
 */
export function kernelPrecision(info: Pick<KernelInfo, "dtype" | "state_dtype"> & { conventions?: Conventions }): Precision {
  const storage = info.dtype as StorageDType, state = info.state_dtype ?? "f32";
  const declared = (info.conventions ?? NO_CONVENTIONS).accumulate;
  if (storage === "f32" && state === "f32" && declared === "f64") return F32_STORE_F64_ACC;
  if (storage === "f32" && declared === "tf32") return { storage, state, accumulate: "tf32" };
  return { storage, state, accumulate: "f32" };
}

const REPLY: TensorNaming = { y: "y", state: (n) => `state.${n}`, grad: (n) => `grads.${n}`, dState0: (n) => `grads.state.${n}` };

/**
 * The names python/PROTOCOL.md gives a case's tensors, built here and nowhere else: requests carry
 * `in.<input>`, `state.<name>`, `dy` and `dstate.<name>`; replies `y`, `state.<name>`,
 * `grads.<input>` and `grads.state.<name>`.
 */
export const wire = {
  input: (n: string): string => `in.${n}`,
  state: (n: string): string => `state.${n}`,
  dy: "dy",
  dFinal: (n: string): string => `dstate.${n}`,
  reply: (k: TensorKey): string => nameOf(k, REPLY),
};

/** What the kernel calls a case's tensors (its declared keywords and initial-state keyword), for messages. */
export function kernelNames(c: PyCase, conv: Conventions | undefined): KernelNames {
  return { keywords: conv?.keywords ?? {}, initialState: conv?.initial_state ?? "initial_state", stateDict: conv?.state_dict ?? false, states: c.stateNames, outputs: conv?.outputs ?? {} };
}

/** The key of a reply tensor (python/PROTOCOL.md: `y`, `state.<name>`, `grads.<input>`, `grads.state.<name>`). */
function replyKey(name: string): TensorKey {
  if (name.startsWith("grads.state.")) return { part: "dState0", name: name.slice("grads.state.".length) };
  if (name.startsWith("grads.")) return { part: "grad", name: name.slice("grads.".length) };
  if (name.startsWith("state.")) return { part: "state", name: name.slice("state.".length) };
  return { part: "y" };
}

/**
 * A reply tensor as a message names it: the kernel's terms first, the report's in brackets
 * (cases/kernel-tensors.ts kernelLabel: `dbeta [dtheta]`, `final state [state M]`), never the
 * protocol's `grads.k`.
 */
export function replyLabel(name: string, c: PyCase, conv: Conventions | undefined): string {
  const k = replyKey(name);
  return kernelLabel(k, tensorName(k, c.frozen, "py"), kernelNames(c, conv));
}

export class KernelSession {
  /** The reference process, started on first use (a kernel that fails at once never needs it). */
  private ref: Promise<TorchBridge> | null = null;

  /** Every kernel request's tensors and reply, in order, while a list is set (a --dump of a replayed case: harness/dump.ts). */
  exchanges: Exchange[] | null = null;

  private constructor(readonly backend: PyBackend, private readonly host: TorchBridge, readonly info: KernelInfo) {}

  /** Starts the kernel host and loads the kernel; a KernelFault names why it cannot be loaded. */
  static async open(backend: PyBackend): Promise<KernelSession> {
    const triton = mayRunTriton(backend);
    const host = await TorchBridge.start({ timeoutMs: kernelTimeoutMs(triton), timeoutSetting: kernelTimeoutSetting(triton) });
    try {
      const r = await host.call({ op: "kernel_load", ...KernelSession.target(backend) }, [], "kernel_load");
      const info = r.header as unknown as KernelInfo;
      host.setTimeoutMs(kernelTimeoutMs(info.interpreted === true), kernelTimeoutSetting(info.interpreted === true));
      return new KernelSession(backend, host, info);
    } catch (e) {
      await host.close();
      throw fault(e, "cannot load the kernel");
    }
  }

  private static target(b: PyBackend) {
    return { kernel: `${b.module}:${b.callable}`, path: process.cwd() };
  }

  /** The last kernel reply's header: what configurations.ts reads (`configurations`, `configurations_same`). */
  lastReply: Readonly<Record<string, unknown>> = {};

  /**
   * One kernel request under the hazard probes (docs/spec/hazards.md): the runs ffi/hazards.ts
   * asks for, each a request with its guards; the judged run's tensors and what the probes found.
   * `configuration`: null for the kernel's default, else a name a reply listed (docs/spec/py-backend.md#configurations).
   */
  private async kernel(op: "kernel_forward" | "kernel_backward", c: PyCase, rule: string, extra: [string, Tensor][], configuration: string | null): Promise<KernelReply> {
    const tol = this.info.nondeterministic?.tolerance ?? null;
    // the probes' runs, each asked for by the plan (ffi/hazards.ts probeRuns) and made here
    const steps = probeRuns<GuardedRun & { tensors: Out }>(HAZARD_PLAN, tol);
    let next = steps.next(), runs = 0;
    while (!next.done) {
      const run = await this.guardedRun(op, c, rule, extra, next.value, configuration);
      runs++;
      next = steps.next(run);
    }
    const p = next.value;
    return { tensors: p.first.tensors, hazards: p.hazards, runs, ...(p.rerunMaxRel !== undefined ? { rerunMaxRel: p.rerunMaxRel } : {}) };
  }

  private async guardedRun(op: "kernel_forward" | "kernel_backward", c: PyCase, rule: string, extra: [string, Tensor][], poisoned: Poisoned,
    configuration: string | null): Promise<GuardedRun & { tensors: Out }> {
    const tensors: [string, Tensor][] = c.kernelInputs.map((n) => [wire.input(n), tokensTensor(c, c.seqs.map((s) => s.kin64[n]!))]);
    for (const n of c.stateNames) tensors.push([wire.state(n), statesTensor(c, c.seqs.map((s) => s.st64[n]!), stateLead(c))]);
    tensors.push(...extra);
    // a packed batch: the offsets travel in the header, the host hands them to the kernel as an int64 tensor
    const packed = c.packed === null ? {} : { cu_seqlens: c.packed.cu };
    // a scale edge: the query scale the kernel is called with (docs/spec/py-backend.md#edges)
    const scale = edgeScaleValue(c.spec.edge, c.cfg.d);
    if (scale !== undefined) Object.assign(packed, { scale });
    try {
      const hazards = guardRequest(HAZARD_PLAN, poisoned);
      const r = await this.host.call({ op, ...KernelSession.target(this.backend), rule, config: c.cfg, configuration, ...packed, hazards }, tensors, `${op} ${rule}`);
      this.lastReply = r.header;
      this.exchanges?.push({ op, sent: tensors, got: r.tensors });
      // the outputs and what the host found unwritten in them, named in the kernel's terms
      const label = (n: string) => replyLabel(n, c, this.info.conventions);
      const writes = ((r.header.hazards ?? []) as Hazard[]).map((h) => (h.kind === "unwritten" ? { ...h, tensor: label(h.tensor) } : h));
      return {
        tensors: r.tensors, outputs: [...r.tensors].map(([n, t]) => [label(n), t.data] as const), writes,
        guarded: (r.header.guarded ?? []) as string[], keywords: (r.header.keywords ?? {}) as Record<string, string>,
      };
    } catch (e) {
      throw fault(e, `${op.replace("kernel_", "")} of ${rule}${configuration === null ? "" : ` (configuration ${configuration})`}`);
    }
  }

  /**
   * A contract probe (docs/spec/py-backend.md#contracts): the forward called, unguarded, with a case
   * the kernel must refuse (`contract` names it to the host). What the kernel raised (`refused`), or
   * null and what it returned instead.
   */
  async contract(c: PyCase, rule: string, contract: string): Promise<{ refused: string | null; returned?: string }> {
    const tensors: [string, Tensor][] = c.kernelInputs.map((n) => [wire.input(n), tokensTensor(c, c.seqs.map((s) => s.kin64[n]!))]);
    for (const n of c.stateNames) tensors.push([wire.state(n), statesTensor(c, c.seqs.map((s) => s.st64[n]!), stateLead(c))]);
    const packed = c.packed === null ? {} : { cu_seqlens: c.packed.cu };
    try {
      const r = await this.host.call({ op: "kernel_forward", ...KernelSession.target(this.backend), rule, config: c.cfg, configuration: null, ...packed, contract }, tensors, `contract ${contract} of ${rule}`);
      return r.header as unknown as { refused: string | null; returned?: string };
    } catch (e) {
      throw fault(e, `contract ${contract} of ${rule}`);
    }
  }

  /** `configuration`: null for the kernel's default, else a name a reply listed (docs/spec/py-backend.md#configurations). */
  forward(c: PyCase, rule: string, configuration: string | null = null): Promise<KernelReply> {
    return this.kernel("kernel_forward", c, rule, [], configuration);
  }

  backward(c: PyCase, rule: string, configuration: string | null = null): Promise<KernelReply> {
    const extra: [string, Tensor][] = [[wire.dy, tokensTensor(c, c.seqs.map((s) => s.dy64))]];
    if (!c.frozen) for (const n of c.stateNames) extra.push([wire.dFinal(n), statesTensor(c, c.seqs.map((s) => s.dFinal64[n]!), stateLead(c))]);
    return this.kernel("kernel_backward", c, rule, extra, configuration);
  }

  /**
   * The PyTorch reference's inner recurrence per sequence [N, ...]: y, final state and, by
   * autograd with dy and d(final state), every input's and the initial state's gradient.
   */
  async torchReference(c: PyCase, rule: string, dtype: "f64" | "f32", intermediates?: StoredIntermediates): Promise<Out> {
    const tensors: [string, Tensor][] = c.inputs.map((n) => [wire.input(n), statesTensor(c, c.seqs.map((s) => s.in64[n]!))]);
    for (const n of c.stateNames) {
      tensors.push([wire.state(n), statesTensor(c, c.seqs.map((s) => s.st64[n]!))]);
      if (!c.frozen) tensors.push([wire.dFinal(n), statesTensor(c, c.seqs.map((s) => s.dFinal64[n]!))]);
    }
    tensors.push([wire.dy, statesTensor(c, c.seqs.map((s) => s.dy64))]);
    this.ref ??= TorchBridge.start({ timeoutMs: 120_000 });
    const header = { op: "inner", rule, config: c.cfg, dtype, ...(intermediates ? { intermediates } : {}) };
    return (await (await this.ref).call(header, tensors, `reference backward of ${rule} (${dtype})`)).tensors;
  }

  /**
   * The yardstick of the flash bound and the bias test (the plain reference at the kernel's
   * precision): the PyTorch reference in f32 on the case's (already rounded) inputs, the tensors
   * `keys` per sequence, each rounded to the dtype the kernel returns it in. The one place this
   * rounding happens.
   */
  async plainReference(c: PyCase, rule: string, p: Precision, keys: readonly TensorKey[], r64?: readonly SeqTensors[]): Promise<SeqTensors<Float64Array>[]> {
    if (c.conv.intermediates === "storage") return this.storagePlainReference(c, rule, p, keys, r64);
    return (await this.grouped(c, (sub) => this.torchReference(sub, rule, "f32"), p, keys))[0]!;
  }

  /**
   * One reference call per distinct sequence length (a packed batch: each sequence alone, at its
   * own length), its outputs rounded, in the case's sequence order; one such list per entry of
   * `vjps` (how the normalisation's VJP reads q̂, k̂: exactly, or as stored in a dtype).
   */
  private async grouped(c: PyCase, call: (sub: PyCase) => Promise<Out>, p: Precision, keys: readonly TensorKey[],
    vjps: readonly (StorageDType | undefined)[] = [undefined]): Promise<SeqTensors<Float64Array>[][]> {
    const out: SeqTensors<Float64Array>[][] = vjps.map(() => new Array(c.seqs.length));
    for (const { sub, seqs } of lengthGroups(c)) {
      const reply = await call(sub);
      vjps.forEach((stored, v) => this.rounded(sub, reply, p, keys, stored).forEach((rs, j) => (out[v]![seqs[j]!] = rs)));
    }
    return out;
  }

  private rounded(c: PyCase, out: Out, p: Precision, keys: readonly TensorKey[], stored?: StorageDType): SeqTensors<Float64Array>[] {
    return readReply(c, out, keys, "stacked", "reference").map((r, n) => {
      const kern = toKernelGrads(c, n, r, stored), rec = emptySeq<Float64Array>();
      for (const [k, a] of entries(kern)) {
        setAt(rec, k, Float64Array.from(roundedCopy(isStateTensor(k) ? p.state : k.part === "grad" ? c.conv.input_dtypes?.[k.name] ?? p.storage : p.storage, a)));
      }
      return rec;
    });
  }

  /**
   * The yardstick of a kernel that keeps its intermediates in its storage dtype
   * (docs/spec/precision.md#intermediates): the PyTorch reference in f32 with its stored values
   * rounded to the storage dtype, once to nearest and STORAGE_RANDOM_RUNS times stochastically,
   * per element the run farthest from ref64 (`r64`, required here). A kernel that normalises q and
   * k itself stores q̂, k̂, and its normalisation's backward may read them back as stored (fla's
   * l2norm_bwd does) or recompute them: each run's gradients are mapped both ways. A kernel that
   * declares a chunk size is measured against the rule's exact chunked form as a chunked kernel
   * stores it, at each declared size, where the reference has that form (storedChunks).
   */
  private async storagePlainReference(c: PyCase, rule: string, p: Precision, keys: readonly TensorKey[], r64?: readonly SeqTensors[]): Promise<SeqTensors<Float64Array>[]> {
    if (r64 === undefined) throw new Error("the storage-intermediates yardstick needs ref64");
    const dtype = p.storage;
    if (dtype === "f32") throw new Error("intermediates \"storage\" needs a bf16 or f16 storage dtype");
    const roundings: StoredIntermediates["rounding"][] = ["nearest", ...Array.from({ length: STORAGE_RANDOM_RUNS }, (_, i) => i + 1)];
    const vjps = c.conv.qk_l2norm ? [undefined, dtype] : [undefined];
    // a chunked kernel is measured against the chunked form at each chunk size it declares (#intermediates-chunked)
    const chunks: (number | undefined)[] = storedChunks(rule, this.info.chunk_sizes);
    const runs: SeqTensors<Float64Array>[][] = [];
    for (const chunk of chunks) {
      for (const rounding of roundings) {
        const inter: StoredIntermediates = chunk === undefined ? { dtype, rounding } : { dtype, rounding, chunk };
        runs.push(...await this.grouped(c, (sub) => this.torchReference(sub, rule, "f32", inter), p, keys, vjps));
      }
    }
    return c.seqs.map((_, n) => {
      const rec = emptySeq<Float64Array>();
      for (const [k, a] of entries(plainYardstickOf(r64[n]!, runs.map((r) => r[n]!)))) setAt(rec, k, Float64Array.from(a));
      return rec;
    });
  }

  async close(): Promise<void> {
    const ref = this.ref;
    this.ref = null;
    await Promise.all([this.host.close(), ref?.then((r) => r.close(), () => undefined)]);
  }
}

/**
 * The chunk sizes of the storage yardstick's runs: each declared one where the torch reference has
 * the rule's chunked stored form, else one per-token run (`undefined`).
 */
export function storedChunks(rule: string, declared: readonly number[] | null | undefined): (number | undefined)[] {
  return declared && declared.length > 0 && CHUNKED_STORED_RULES.includes(rule) ? [...declared] : [undefined];
}

function fault(e: unknown, what: string): KernelFault {
  if (e instanceof TorchBridgeError) {
    const kind = e.kind === "request" ? "error" : e.kind;
    return new KernelFault(kind, `${what}: ${e.message.replace(/^torch bridge: /, "")}`);
  }
  return new KernelFault("error", `${what}: ${e instanceof Error ? e.message : String(e)}`);
}

/**
 * A reply's tensors `keys` per sequence: a kernel's in the canonical layout (per-token [B, T, H, ...],
 * states [B, H, ...]), the reference's stacked [N, ...]. A missing tensor is a protocol fault.
 */
export function readReply(c: PyCase, out: Out, keys: readonly TensorKey[], layout: "kernel" | "stacked", what: string): SeqTensors<Float64Array>[] {
  const seqs = c.seqs.map(() => emptySeq<Float64Array>());
  for (const k of keys) {
    const t = out.get(wire.reply(k));
    if (t === undefined) throw new KernelFault("protocol", `${what}: the reply has no ${wire.reply(k)}`);
    const perToken = layout === "kernel" && (k.part === "y" || k.part === "grad");
    seqs.forEach((s, n) => setAt(s, k, perToken ? seqTokens(c, t, n) : seqState(c, t, n)));
  }
  return seqs;
}
