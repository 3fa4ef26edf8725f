/**
 * The TypeScript end of the PyTorch bridge (README D19): spawns `python -m nlc_torch.bridge`
 * once, keeps it alive for a run, and speaks the protocol of python/PROTOCOL.md (one JSON header
 * line, then the raw little-endian f64 bytes of the tensors it lists).
 *
 *   const br = await TorchBridge.start();            // or: probeTorch() first
 *   const r = await br.runRule({ rule: "delta", config, X, dy, params, state });
 *   const m = await br.runModel({ config, levels, active, ids, targets, params, context });
 *   await br.close();
 *
 * Errors are TorchBridgeError with a kind: "unavailable" (no python / no torch), "died" (the
 * process exited: code or signal and the tail of its stderr), "timeout" (the process is killed
 * and restarted on the next request), "request" (the bridge rejected the input; it names the field).
 */
import { Tensor } from "../src/tensor.ts";
import {
  TorchBridgeError, type BridgeOptions, type HelloInfo, type ModelReply, type ModelRequest, type ProbeResult, type RuleReply,
  type RuleRequest,
} from "./torch-protocol.ts";
import { encode, type Message } from "./torch-wire.ts";
import { Proc, defaultPython, moduleCommand, prefixed, pythonEnv, replyError } from "./torch-process.ts";


export * from "./torch-protocol.ts";

/** Starts of the bridge tried when the handshake times out (the second with twice the time). */
export const START_ATTEMPTS = 2;

export class TorchBridge {
  private proc: Proc | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  private closed = false;
  private _info: HelloInfo | null = null;
  /** Wall time of the last start: spawn, python + torch import, hello round trip (ms). */
  startupMs = 0;

  private constructor(private opts: BridgeOptions) {}

  /** Changes the per-request time limit from the next request on (a kernel host that interprets Triton kernels). */
  setTimeoutMs(ms: number, setting?: string): void {
    this.opts = { ...this.opts, timeoutMs: ms, ...(setting !== undefined ? { timeoutSetting: setting } : {}) };
  }

  /** Starts the process and checks the handshake; TorchBridgeError "unavailable" when python or torch is missing. */
  static async start(opts: BridgeOptions = {}): Promise<TorchBridge> {
    const b = new TorchBridge(opts);
    await b.ensure();
    return b;
  }

  /** The live process id (null before start or after it died). */
  get pid(): number | null {
    return this.proc !== null && this.proc.dead === null ? this.proc.childPid ?? this.proc.sub.pid : null;
  }

  get info(): HelloInfo {
    if (this._info === null) throw new TorchBridgeError("protocol", "torch bridge: not started");
    return this._info;
  }

  private async ensure(): Promise<Proc> {
    if (this.closed) throw new TorchBridgeError("died", "torch bridge: closed");
    if (this.proc !== null && this.proc.dead === null) return this.proc;
    const python = defaultPython(this.opts);
    const t0 = performance.now();
    const limit = this.opts.startTimeoutMs ?? 60_000;
    let p: Proc, m: Message;
    // A start that times out is tried once more with twice the time: on a starved machine importing
    // torch can take longer than the limit, and a second start finds the files in the page cache.
    for (let attempt = 1; ; attempt++) {
      p = new Proc(python, this.opts);
      try {
        m = await p.request(encode({ op: "hello", id: 0 }, []), "hello", limit * attempt);
        break;
      } catch (e) {
        p.kill();
        const err = e as TorchBridgeError;
        if (err.kind === "timeout" && attempt < START_ATTEMPTS) continue;
        const missing = /No such file|ENOENT|not found/i.test(err.message);
        throw new TorchBridgeError("unavailable", missing
          ? `torch bridge: python interpreter ${python} not found (set NLC_TORCH_PYTHON or the python option)`
          : `torch bridge: ${python} could not start the bridge${attempt > 1 ? ` (${attempt} attempts)` : ""}: ${err.message}`);
      }
    }
    const h = m.header;
    if (typeof h.pid === "number" && h.pid !== p.sub.pid) p.childPid = h.pid;
    if (h.ok !== true) {
      p.endInput();
      p.kill();
      throw new TorchBridgeError("unavailable", `torch bridge: ${String(h.error ?? "hello failed")}`);
    }
    this._info = {
      protocol: h.protocol, torch: h.torch, python: h.python, rules: h.rules, models: h.models,
      hyperDefaults: h.hyper_defaults,
    };
    this.startupMs = performance.now() - t0;
    this.proc = p;
    return p;
  }

  /** Requests go one at a time, in order. */
  private send(header: Record<string, unknown>, tensors: [string, Tensor][], what: string): Promise<Message> {
    const run = async () => {
      const p = await this.ensure();
      const id = this.nextId++;
      const m = await p.request(encode({ ...header, id }, tensors), what, this.opts.timeoutMs ?? 60_000, this.opts.timeoutSetting);
      if (m.header.id !== id) throw new TorchBridgeError("protocol", `torch bridge: reply id ${m.header.id}, expected ${id}`);
      const err = replyError(m.header, what);
      if (err !== null) throw err;
      return m;
    };
    const r = this.chain.then(run, run);
    this.chain = r.catch(() => undefined);
    return r;
  }

  async runRule(req: RuleRequest): Promise<RuleReply> {
    const tensors: [string, Tensor][] = [["X", req.X], ["dy", req.dy]];
    for (const [n, t] of Object.entries(req.params)) tensors.push([`params.${n}`, t]);
    for (const [n, t] of Object.entries(req.state ?? {})) tensors.push([`state.${n}`, t]);
    const key = req.frozen ? `${req.rule}.frozen` : req.rule;
    const t0 = performance.now();
    const m = await this.send({ op: "rule", rule: req.rule, frozen: req.frozen ?? false, config: req.config }, tensors, `rule ${key}`);
    const roundTripMs = performance.now() - t0;
    const y = m.tensors.get("y");
    if (y === undefined) throw new TorchBridgeError("protocol", `torch bridge: rule ${key}: reply without y`);
    return {
      y, state: prefixed(m.tensors, "state."), grads: prefixed(m.tensors, "grads."),
      stateGrads: prefixed(m.tensors, "grads.state."), ms: Number(m.header.ms), roundTripMs,
    };
  }

  async runModel(req: ModelRequest): Promise<ModelReply> {
    const tensors: [string, Tensor][] = [];
    for (const [n, t] of Object.entries(req.params.model)) tensors.push([`params.model.${n}`, t]);
    req.params.levels.forEach((rec, l) => {
      for (const [n, t] of Object.entries(rec)) tensors.push([`params.levels.${l}.${n}`, t]);
    });
    (req.context ?? []).forEach((rec, l) => {
      for (const [n, t] of Object.entries(rec ?? {})) tensors.push([`context.${l}.${n}`, t]);
    });
    const header: Record<string, unknown> = {
      op: "model", composition: req.composition ?? "mag", config: req.config, levels: req.levels,
      input_ids: req.ids, target_ids: req.targets,
    };
    if (req.chunkSizes !== undefined) header.chunk_sizes = req.chunkSizes;
    if (req.active !== undefined) header.active = req.active;
    if (req.step !== undefined) header.step = req.step;
    const t0 = performance.now();
    const m = await this.send(header, tensors, `model (${req.levels.map((l) => l.rule).join(",")})`);
    const roundTripMs = performance.now() - t0;
    const k = req.levels.length;
    const loss = m.tensors.get("loss");
    const outs: Tensor[] = [];
    for (let l = 0; l < k; l++) outs.push(m.tensors.get(`level_outputs.${l}`)!);
    return {
      loss: loss !== undefined ? loss.data[0]! : Number(m.header.loss),
      grads: {
        model: prefixed(m.tensors, "grads.model."),
        levels: Array.from({ length: k }, (_, l) => prefixed(m.tensors, `grads.levels.${l}.`)),
      },
      errorBuffers: Array.from({ length: k }, (_, l) => prefixed(m.tensors, `error_buffers.${l}.`)),
      active: m.header.active as boolean[],
      gates: (m.header.gates ?? null) as number[] | null,
      context: Array.from({ length: k }, (_, l) => prefixed(m.tensors, `context.${l}.`)),
      levelOutputs: outs,
      ms: Number(m.header.ms),
      roundTripMs,
    };
  }

  /**
   * Any request of the protocol (e.g. the kernel host's kernel_* or the inner reference): the
   * reply's header and tensors; a reply with ok = false is a TorchBridgeError "request".
   */
  async call(header: Record<string, unknown>, tensors: [string, Tensor][], what: string): Promise<{ header: Record<string, any>; tensors: Map<string, Tensor>; roundTripMs: number }> {
    const t0 = performance.now();
    const m = await this.send(header, tensors, what);
    return { header: m.header, tensors: m.tensors, roundTripMs: performance.now() - t0 };
  }

  /** Sends a raw request (tests of the protocol's error handling); resolves with the reply header. */
  async raw(header: Record<string, unknown>, tensors: [string, Tensor][] = []): Promise<Record<string, any>> {
    const run = async () => {
      const p = await this.ensure();
      const id = this.nextId++;
      return (await p.request(encode({ ...header, id }, tensors), `raw ${String(header.op)}`, this.opts.timeoutMs ?? 60_000, this.opts.timeoutSetting)).header;
    };
    const r = this.chain.then(run, run);
    this.chain = r.catch(() => undefined);
    return r;
  }

  /** Asks the process to exit and waits (kills it after 2 s). */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.chain;
    this.closed = true;
    const p = this.proc;
    this.proc = null;
    if (p === null || p.dead !== null) return;
    try {
      await Promise.race([
        p.request(encode({ op: "shutdown", id: -1 }, []), "shutdown", 2000),
        new Promise((r) => setTimeout(r, 2000)),
      ]);
    } catch {
      // already gone
    }
    p.endInput();
    const done = await Promise.race([p.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 2000))]);
    if (!done) p.kill();
  }
}

/** Whether the bridge can run here: python found, torch importable, handshake answered. */
export async function probeTorch(opts: BridgeOptions = {}): Promise<ProbeResult> {
  let b: TorchBridge | null = null;
  try {
    b = await TorchBridge.start({ startTimeoutMs: 60_000, ...opts });
    const r: ProbeResult = { available: true, version: b.info.torch, python: b.info.python, startupMs: b.startupMs };
    return r;
  } catch (e) {
    return { available: false, reason: (e as Error).message };
  } finally {
    await b?.close();
  }
}

// ── a shared default bridge ─────────────────────────────────────────────────────────────────

let shared: Promise<TorchBridge> | null = null;

function sharedBridge(): Promise<TorchBridge> {
  if (shared === null) {
    shared = TorchBridge.start();
    shared.catch(() => { shared = null; });
  }
  return shared;
}

/** runRule on a process shared by the whole run (started on first use). */
export async function runRule(req: RuleRequest): Promise<RuleReply> {
  return (await sharedBridge()).runRule(req);
}

/** runModel on the shared process. */
export async function runModel(req: ModelRequest): Promise<ModelReply> {
  return (await sharedBridge()).runModel(req);
}

/** Closes the shared process (a later call starts a new one). */
export async function close(): Promise<void> {
  const s = shared;
  shared = null;
  if (s !== null) await (await s).close();
}

/**
 * Whether the PyTorch reference can run here, asked synchronously (for the catalogue): the
 * interpreter exists and imports torch. The reason names what is missing.
 */
export function probeTorchSync(opts: BridgeOptions = {}): { available: true } | { available: false; reason: string } {
  const python = defaultPython(opts);
  let p;
  try {
    // Through the zygote (docs/spec/conformance.md#zygote): once it runs, a probe is a fork.
    const env = pythonEnv();
    p = Bun.spawnSync({ cmd: moduleCommand(python, "nlc_torch.has_torch", env), stdin: "ignore", stdout: "ignore", stderr: "pipe", timeout: 120_000, env });
  } catch (e) {
    // A missing or non-executable interpreter (ENOENT, EACCES): a reason, never a crash.
    const why = (e as { code?: string }).code ?? (e instanceof Error ? e.message : String(e));
    return { available: false, reason: `${python} cannot be started (${why}); install Debian's python3-torch or set NLC_TORCH_PYTHON to a Python with torch` };
  }
  if (p.exitCode === 0) return { available: true };
  if (p.exitCode === null) return { available: false, reason: `${python} did not answer (${p.signalCode ?? "killed"})` };
  const err = p.stderr.toString().trim().split("\n").pop() ?? "";
  return { available: false, reason: `${python} cannot import torch (${err || `exit ${p.exitCode}`}); install Debian's python3-torch or set NLC_TORCH_PYTHON` };
}
