/** The requests, replies and errors of the PyTorch bridge (python/PROTOCOL.md; README D19). */
import { Tensor } from "../src/tensor.ts";

export type TensorRecord = Record<string, Tensor>;

export interface BridgeOptions {
  /** Interpreter with torch. Default: $NLC_TORCH_PYTHON, else /usr/bin/python3 (Debian's python3-torch). */
  readonly python?: string;
  /** Per-request timeout (ms). Default 60 000. */
  readonly timeoutMs?: number;
  /** The setting the per-request timeout comes from, named in a timeout's message (`NLC_PY_KERNEL_TIMEOUT=60 s`). */
  readonly timeoutSetting?: string;
  /** Timeout of the start handshake (python start + `import torch`), ms. Default 60 000. */
  readonly startTimeoutMs?: number;
  /** Copy the bridge's stderr to ours (it is always kept for error messages). */
  readonly echoStderr?: boolean;
  /** torch.set_num_threads for the bridge (env NLC_TORCH_THREADS). */
  readonly threads?: number;
}

export type BridgeErrorKind = "unavailable" | "died" | "timeout" | "request" | "protocol";

export class TorchBridgeError extends Error {
  constructor(readonly kind: BridgeErrorKind, message: string) {
    super(message);
    this.name = "TorchBridgeError";
  }
}

export interface HelloInfo {
  readonly protocol: number;
  readonly torch: string;
  readonly python: string;
  /** Rule keys, frozen variants as `<rule>.frozen`. */
  readonly rules: readonly string[];
  readonly models: readonly { composition: string; k: number[]; freq_schedule: string[] }[];
  readonly hyperDefaults: Readonly<Record<string, Readonly<Record<string, number | string>>>>;
}

export interface RuleRequest {
  /** A rule key (`delta`, ..., `swa`); `<rule>.frozen` is the same as `frozen: true`. */
  readonly rule: string;
  readonly frozen?: boolean;
  /** `d`, `seq_len` and the rule's hyperparameters by their canonical names. */
  readonly config: Readonly<Record<string, number | string>>;
  readonly X: Tensor;
  readonly dy: Tensor;
  readonly params: Readonly<TensorRecord>;
  /** Initial state by canonical names; absent entries start from the rule's init (D4). */
  readonly state?: Readonly<TensorRecord>;
}

export interface RuleReply {
  readonly y: Tensor;
  /** Final state (frozen: the initial state). Moneta q != 2 adds A1, A2; YAAD adds B1, B2. */
  readonly state: TensorRecord;
  /** loss = sum(y * dy): grads of X and of every parameter (zero where unused). */
  readonly grads: TensorRecord;
  /** Gradient of the loss w.r.t. the initial state. */
  readonly stateGrads: TensorRecord;
  /** Time the bridge spent on the request (ms), and the round trip seen here. */
  readonly ms: number;
  readonly roundTripMs: number;
}

export interface ModelLevel {
  readonly rule: string;
  readonly hyper?: Readonly<Record<string, number | string>>;
}

export interface ModelRequest {
  /** docs/spec/composition.md; default "mag". */
  readonly composition?: "mag" | "mac" | "mal";
  readonly config: {
    readonly d: number; readonly seq_len: number; readonly vocab: number; readonly heads: number; readonly window: number;
    readonly freq_schedule?: "fixed" | "learned";
    readonly freq_threshold?: number;
    /** MAC's persistent tokens n_p. */
    readonly persistent?: number;
  };
  readonly levels: readonly ModelLevel[];
  /** Default: D11's for k. */
  readonly chunkSizes?: readonly number[];
  /** Fixed schedule: which levels are active (or give `step` for the D11 pulse). Ignored under the learned gate. */
  readonly active?: readonly boolean[];
  readonly step?: number;
  readonly ids: readonly number[];
  /** D12: ids in [0, V) or -1 (padding). */
  readonly targets: readonly number[];
  readonly params: { readonly model: Readonly<TensorRecord>; readonly levels: readonly Readonly<TensorRecord>[] };
  /** Per level; null/absent: the rule's init (D4). */
  readonly context?: readonly (Readonly<TensorRecord> | null | undefined)[];
}

export interface ModelReply {
  readonly loss: number;
  readonly grads: { model: TensorRecord; levels: TensorRecord[] };
  /** Per level: {W_Q} for a frozen level, {} for an active one (after this step from empty buffers). */
  readonly errorBuffers: TensorRecord[];
  readonly active: boolean[];
  readonly gates: number[] | null;
  /** The context after the step. */
  readonly context: TensorRecord[];
  /** y_l per level (unscaled). */
  readonly levelOutputs: Tensor[];
  readonly ms: number;
  readonly roundTripMs: number;
}

export type ProbeResult =
  | { readonly available: true; readonly version: string; readonly python: string; readonly startupMs: number }
  | { readonly available: false; readonly reason: string };
