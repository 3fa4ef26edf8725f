/**
 * The two Python processes of a py: backend run: the kernel host (the kernel under test, which
 * may die, hang or misbehave: per-request timeout, restarted on the next request) and the
 * reference bridge (the yardstick: a plain run of the PyTorch reference at the kernel's precision,
 * docs/spec/py-backend.md#reference, #precision). Both speak python/PROTOCOL.md through
 * oracle/torch-bridge.ts.
 */
import { TorchBridge, TorchBridgeError } from "../../oracle/torch-bridge.ts";
import { roundedCopy, type Precision, type StorageDType } from "../../src/precision.ts";
import { Tensor } from "../../src/tensor.ts";
import { F32_STORE_F64_ACC } from "../c5/compare.ts";
import { packTokens, stackSeqs, type PyCase } from "./cases.ts";
import type { PyBackend } from "./plan.ts";

/** What the kernel declares (kernel_load's reply). */
export interface KernelInfo {
  kernel: string;
  rules: string[];
  dtype: string;
  /** The dtype of the initial and final state (and their gradients); "f32" unless declared. */
  state_dtype: StorageDType;
  layout: string;
  state_layout: string;
  backward: "explicit" | "autograd";
  device: string;
  judged: boolean;
  skip_reason: string | null;
  torch: string;
}

/** A kernel request failed: the kernel raised, broke its contract, died or timed out. */
export class KernelFault extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
    this.name = "KernelFault";
  }
}

/** Per-request time limit of the kernel host: NLC_PY_KERNEL_TIMEOUT seconds, default 60. */
export function kernelTimeoutMs(): number {
  const s = Number(process.env.NLC_PY_KERNEL_TIMEOUT);
  return Number.isFinite(s) && s > 0 ? s * 1000 : 60_000;
}

export type Out = Map<string, Tensor>;

/**
 * The precision a judged kernel is held to (docs/spec/py-backend.md#precision): storage = its
 * dtype, state = its state_dtype, sums in f32. An all-f32 kernel keeps the f64-accumulate floor
 * it was always judged with: its yardstick is a plain f32 PyTorch run (f32 scalars as well as f32
 * sums), which the wider floor of the emulated f32 reference exists to make up for.
 */
export function kernelPrecision(info: Pick<KernelInfo, "dtype" | "state_dtype">): Precision {
  const storage = info.dtype as StorageDType, state = info.state_dtype ?? "f32";
  if (storage === "f32" && state === "f32") return F32_STORE_F64_ACC;
  return { storage, state, accumulate: "f32" };
}

/** Where a reply tensor is stored: states and their gradients in the state dtype, everything else in the storage dtype. */
const isStateName = (name: string): boolean => name.startsWith("state.") || name.startsWith("grads.state.");

export class KernelSession {
  /** The reference process, started on first use (a kernel that fails at once never needs it). */
  private ref: Promise<TorchBridge> | null = null;

  private constructor(readonly backend: PyBackend, private readonly host: TorchBridge, readonly info: KernelInfo) {}

  /** Starts the kernel host and loads the kernel; a KernelFault names why it cannot be loaded. */
  static async open(backend: PyBackend): Promise<KernelSession> {
    const host = await TorchBridge.start({ timeoutMs: kernelTimeoutMs() });
    try {
      const r = await host.call({ op: "kernel_load", ...KernelSession.target(backend) }, [], "kernel_load");
      return new KernelSession(backend, host, r.header as unknown as KernelInfo);
    } catch (e) {
      await host.close();
      throw fault(e, "cannot load the kernel");
    }
  }

  private static target(b: PyBackend) {
    return { kernel: `${b.module}:${b.callable}`, path: process.cwd() };
  }

  private async kernel(op: "kernel_forward" | "kernel_backward", c: PyCase, rule: string, extra: [string, Tensor][]): Promise<Out> {
    const tensors: [string, Tensor][] = c.inputs.map((n) => [`in.${n}`, packTokens(c, (s) => s.in64[n]!)]);
    for (const n of c.stateNames) tensors.push([`state.${n}`, stackSeqs(c, (s) => s.st64[n]!, [c.B, c.H])]);
    tensors.push(...extra);
    try {
      const r = await this.host.call({ op, ...KernelSession.target(this.backend), rule, config: c.cfg }, tensors, `${op} ${rule}`);
      return r.tensors;
    } catch (e) {
      throw fault(e, `${op.replace("kernel_", "")} of ${rule}`);
    }
  }

  forward(c: PyCase, rule: string): Promise<Out> {
    return this.kernel("kernel_forward", c, rule, []);
  }

  backward(c: PyCase, rule: string): Promise<Out> {
    const extra: [string, Tensor][] = [["dy", packTokens(c, (s) => s.dy64)]];
    if (!c.frozen) for (const n of c.stateNames) extra.push([`dstate.${n}`, stackSeqs(c, (s) => s.dFinal64[n]!, [c.B, c.H])]);
    return this.kernel("kernel_backward", c, rule, extra);
  }

  /**
   * The PyTorch reference's inner recurrence per sequence [N, ...]: y, final state and, by
   * autograd with dy and d(final state), every input's and the initial state's gradient.
   */
  async torchReference(c: PyCase, rule: string, dtype: "f64" | "f32"): Promise<Out> {
    const tensors: [string, Tensor][] = c.inputs.map((n) => [`in.${n}`, stackSeqs(c, (s) => s.in64[n]!)]);
    for (const n of c.stateNames) {
      tensors.push([`state.${n}`, stackSeqs(c, (s) => s.st64[n]!)]);
      if (!c.frozen) tensors.push([`dstate.${n}`, stackSeqs(c, (s) => s.dFinal64[n]!)]);
    }
    tensors.push(["dy", stackSeqs(c, (s) => s.dy64)]);
    this.ref ??= TorchBridge.start({ timeoutMs: 120_000 });
    return (await (await this.ref).call({ op: "inner", rule, config: c.cfg, dtype }, tensors, `reference backward of ${rule} (${dtype})`)).tensors;
  }

  /**
   * The yardstick of the flash bound and the bias test (the plain reference at the kernel's
   * precision): the PyTorch reference in f32 on the case's (already rounded) inputs, each output
   * rounded to the dtype the kernel returns it in. The one place this rounding happens.
   */
  async plainReference(c: PyCase, rule: string, p: Precision): Promise<Out> {
    const out: Out = new Map();
    for (const [name, t] of await this.torchReference(c, rule, "f32")) {
      const r = new Tensor("f64", [...t.shape]);
      r.data.set(roundedCopy(isStateName(name) ? p.state : p.storage, t.data));
      out.set(name, r);
    }
    return out;
  }

  async close(): Promise<void> {
    const ref = this.ref;
    this.ref = null;
    await Promise.all([this.host.close(), ref?.then((r) => r.close(), () => undefined)]);
  }
}

function fault(e: unknown, what: string): KernelFault {
  if (e instanceof TorchBridgeError) {
    const kind = e.kind === "request" ? "error" : e.kind;
    return new KernelFault(kind, `${what}: ${e.message.replace(/^torch bridge: /, "")}`);
  }
  return new KernelFault("error", `${what}: ${e instanceof Error ? e.message : String(e)}`);
}
