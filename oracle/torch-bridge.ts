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
import { Tensor, sizeOf } from "../src/tensor.ts";
import { forwardInterrupts } from "./child-signals.ts";

export type TensorRecord = Record<string, Tensor>;

export interface BridgeOptions {
  /** Interpreter with torch. Default: $NLC_TORCH_PYTHON, else /usr/bin/python3 (Debian's python3-torch). */
  readonly python?: string;
  /** Per-request timeout (ms). Default 60 000. */
  readonly timeoutMs?: number;
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

// ── wire format ─────────────────────────────────────────────────────────────────────────────

interface WireSpec {
  name: string;
  shape: number[];
  nbytes: number;
}

const LITTLE_ENDIAN = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f;
const ENC = new TextEncoder();
const DEC = new TextDecoder();

function tensorBytes(t: Tensor): Uint8Array {
  const f64 = t.data instanceof Float64Array ? t.data : Float64Array.from(t.data);
  if (LITTLE_ENDIAN) return new Uint8Array(f64.buffer, f64.byteOffset, f64.byteLength);
  const out = new Uint8Array(f64.length * 8);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < f64.length; i++) dv.setFloat64(i * 8, f64[i]!, true);
  return out;
}

function bytesTensor(shape: number[], bytes: Uint8Array): Tensor {
  const n = sizeOf(shape);
  let data: Float64Array;
  if (LITTLE_ENDIAN) data = new Float64Array(bytes.slice().buffer, 0, n);
  else {
    data = new Float64Array(n);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < n; i++) data[i] = dv.getFloat64(i * 8, true);
  }
  return new Tensor("f64", shape, data);
}

function encode(header: Record<string, unknown>, tensors: readonly [string, Tensor][]): Uint8Array {
  const specs: WireSpec[] = [];
  const blobs: Uint8Array[] = [];
  for (const [name, t] of tensors) {
    const b = tensorBytes(t);
    specs.push({ name, shape: [...t.shape], nbytes: b.byteLength });
    blobs.push(b);
  }
  const head = ENC.encode(JSON.stringify({ ...header, tensors: specs }) + "\n");
  const total = head.byteLength + blobs.reduce((a, b) => a + b.byteLength, 0);
  const out = new Uint8Array(total);
  out.set(head, 0);
  let o = head.byteLength;
  for (const b of blobs) {
    out.set(b, o);
    o += b.byteLength;
  }
  return out;
}

interface Message {
  header: Record<string, any>;
  tensors: Map<string, Tensor>;
}

/** Incremental decoder of the reply stream. */
class Decoder {
  private buf = new Uint8Array(1 << 16);
  private len = 0;
  private head: Record<string, any> | null = null;
  private need = 0;

  push(chunk: Uint8Array): void {
    if (this.len + chunk.byteLength > this.buf.byteLength) {
      const nb = new Uint8Array(Math.max(this.buf.byteLength * 2, this.len + chunk.byteLength));
      nb.set(this.buf.subarray(0, this.len));
      this.buf = nb;
    }
    this.buf.set(chunk, this.len);
    this.len += chunk.byteLength;
  }

  /** The next complete message, or null. Throws on a malformed header. */
  next(): Message | null {
    if (this.head === null) {
      const nl = this.buf.subarray(0, this.len).indexOf(10);
      if (nl < 0) return null;
      const line = DEC.decode(this.buf.subarray(0, nl));
      this.consume(nl + 1);
      let h: unknown;
      try {
        h = JSON.parse(line);
      } catch {
        throw new TorchBridgeError("protocol", `torch bridge: reply header is not JSON: ${line.slice(0, 200)}`);
      }
      if (typeof h !== "object" || h === null || !Array.isArray((h as any).tensors)) {
        throw new TorchBridgeError("protocol", `torch bridge: reply header without a tensors list: ${line.slice(0, 200)}`);
      }
      this.head = h as Record<string, any>;
      this.need = (this.head.tensors as WireSpec[]).reduce((a, s) => a + s.nbytes, 0);
    }
    if (this.len < this.need) return null;
    const tensors = new Map<string, Tensor>();
    let o = 0;
    for (const s of this.head.tensors as WireSpec[]) {
      tensors.set(s.name, bytesTensor(s.shape, this.buf.subarray(o, o + s.nbytes)));
      o += s.nbytes;
    }
    this.consume(this.need);
    const msg = { header: this.head, tensors };
    this.head = null;
    this.need = 0;
    return msg;
  }

  private consume(n: number): void {
    this.buf.copyWithin(0, n, this.len);
    this.len -= n;
  }
}

// ── the process ─────────────────────────────────────────────────────────────────────────────

const PYTHON_DIR = decodeURIComponent(new URL("../python", import.meta.url).pathname);
const STDERR_TAIL = 4000;

function defaultPython(opts: BridgeOptions): string {
  return opts.python ?? process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";
}

interface Pending {
  resolve(m: Message): void;
  reject(e: Error): void;
}

/** One live bridge process. */
class Proc {
  readonly sub: ReturnType<typeof Bun.spawn>;
  private readonly decoder = new Decoder();
  private readonly waiting: Pending[] = [];
  private stderrTail = "";
  private writeError: string | null = null;
  dead: TorchBridgeError | null = null;
  readonly exited: Promise<void>;

  constructor(readonly python: string, opts: BridgeOptions) {
    const env: Record<string, string> = { ...(process.env as Record<string, string>) };
    env.PYTHONPATH = env.PYTHONPATH ? `${PYTHON_DIR}:${env.PYTHONPATH}` : PYTHON_DIR;
    env.PYTHONDONTWRITEBYTECODE = "1";
    env.PYTHONUNBUFFERED = "1";
    if (opts.threads !== undefined) env.NLC_TORCH_THREADS = String(opts.threads);
    try {
      this.sub = Bun.spawn([python, "-m", "nlc_torch.bridge"], { stdin: "pipe", stdout: "pipe", stderr: "pipe", env });
    } catch (e) {
      throw new TorchBridgeError("unavailable", `torch bridge: cannot start ${python}: ${(e as Error).message}`);
    }
    // SIGINT/SIGTERM reaching this process reach the bridge process too.
    const stopForwarding = forwardInterrupts(this.sub);
    void this.sub.exited.then(stopForwarding);
    const echo = opts.echoStderr ?? false;
    void this.pumpStderr(echo);
    this.exited = this.pumpStdout();
  }

  private async pumpStderr(echo: boolean): Promise<void> {
    const stream = this.sub.stderr as ReadableStream<Uint8Array>;
    const dec = new TextDecoder();
    try {
      for await (const chunk of stream) {
        const s = dec.decode(chunk, { stream: true });
        if (echo) process.stderr.write(s);
        this.stderrTail = (this.stderrTail + s).slice(-STDERR_TAIL);
      }
    } catch {
      // the process is gone; the stdout pump reports it
    }
  }

  private async pumpStdout(): Promise<void> {
    const stream = this.sub.stdout as ReadableStream<Uint8Array>;
    try {
      for await (const chunk of stream) {
        this.decoder.push(chunk);
        for (let m = this.decoder.next(); m !== null; m = this.decoder.next()) {
          const p = this.waiting.shift();
          if (p === undefined) throw new TorchBridgeError("protocol", "torch bridge: a reply arrived with no request waiting");
          p.resolve(m);
        }
      }
    } catch (e) {
      this.fail(e instanceof TorchBridgeError ? e : new TorchBridgeError("protocol", `torch bridge: ${(e as Error).message}`));
      this.sub.kill("SIGKILL");
    }
    await this.sub.exited;
    // Let the stderr pump drain what the process wrote last.
    await new Promise((r) => setTimeout(r, 20));
    const how = this.sub.signalCode !== null ? `signal ${this.sub.signalCode}` : `exit code ${this.sub.exitCode}`;
    const tail = this.stderrTail.trim();
    this.fail(new TorchBridgeError("died",
      `torch bridge: the process (${this.python} -m nlc_torch.bridge) ended with ${how}` +
      (this.writeError !== null ? ` (writing to it failed: ${this.writeError})` : "") +
      (tail ? `; stderr tail:\n${tail}` : "; no stderr output")));
  }

  private fail(e: TorchBridgeError): void {
    if (this.dead === null) this.dead = e;
    for (const p of this.waiting.splice(0)) p.reject(this.dead);
  }

  request(bytes: Uint8Array, what: string, timeoutMs: number): Promise<Message> {
    if (this.dead !== null) return Promise.reject(this.dead);
    return new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        const e = new TorchBridgeError("timeout",
          `torch bridge: ${what} timed out after ${timeoutMs} ms; the bridge process was killed (the next request starts a new one)` +
          (this.stderrTail.trim() ? `; stderr tail:\n${this.stderrTail.trim()}` : ""));
        this.fail(e);
        this.sub.kill("SIGKILL");
      }, timeoutMs);
      this.waiting.push({
        resolve: (m) => { clearTimeout(timer); resolve(m); },
        reject: (err) => { clearTimeout(timer); reject(err); },
      });
      // A write into a process that already exited fails (EPIPE); the exit itself is then
      // reported by the stdout pump with the exit code and the stderr tail.
      const noteWriteError = (err: unknown) => {
        this.writeError ??= (err as Error).message;
      };
      try {
        const sink = this.sub.stdin as import("bun").FileSink;
        sink.write(bytes);
        Promise.resolve(sink.flush()).catch(noteWriteError);
      } catch (err) {
        noteWriteError(err);
      }
    });
  }

  kill(): void {
    this.sub.kill("SIGKILL");
  }

  endInput(): void {
    try {
      void (this.sub.stdin as import("bun").FileSink).end();
    } catch {
      // already closed
    }
  }
}

function replyError(h: Record<string, any>, what: string): TorchBridgeError | null {
  if (h.ok === true) return null;
  return new TorchBridgeError("request", `torch bridge: ${what}: ${String(h.error ?? "request failed")}`);
}

function prefixed(tensors: Map<string, Tensor>, prefix: string): TensorRecord {
  const out: TensorRecord = {};
  for (const [n, t] of tensors) {
    if (!n.startsWith(prefix)) continue;
    const rest = n.slice(prefix.length);
    if (!rest.includes(".")) out[rest] = t;
  }
  return out;
}

export class TorchBridge {
  private proc: Proc | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private nextId = 1;
  private closed = false;
  private _info: HelloInfo | null = null;
  /** Wall time of the last start: spawn, python + torch import, hello round trip (ms). */
  startupMs = 0;

  private constructor(private readonly opts: BridgeOptions) {}

  /** Starts the process and checks the handshake; TorchBridgeError "unavailable" when python or torch is missing. */
  static async start(opts: BridgeOptions = {}): Promise<TorchBridge> {
    const b = new TorchBridge(opts);
    await b.ensure();
    return b;
  }

  /** The live process id (null before start or after it died). */
  get pid(): number | null {
    return this.proc !== null && this.proc.dead === null ? this.proc.sub.pid : null;
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
    const p = new Proc(python, this.opts);
    let m: Message;
    try {
      m = await p.request(encode({ op: "hello", id: 0 }, []), "hello", this.opts.startTimeoutMs ?? 60_000);
    } catch (e) {
      p.kill();
      const err = e as TorchBridgeError;
      const missing = /No such file|ENOENT|not found/i.test(err.message);
      throw new TorchBridgeError("unavailable", missing
        ? `torch bridge: python interpreter ${python} not found (set NLC_TORCH_PYTHON or the python option)`
        : `torch bridge: ${python} could not start the bridge: ${err.message}`);
    }
    const h = m.header;
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
      const m = await p.request(encode({ ...header, id }, tensors), what, this.opts.timeoutMs ?? 60_000);
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
      return (await p.request(encode({ ...header, id }, tensors), `raw ${String(header.op)}`, this.opts.timeoutMs ?? 60_000)).header;
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
  const p = Bun.spawnSync({ cmd: [python, "-c", "import torch"], stdout: "ignore", stderr: "pipe", timeout: 120_000 });
  if (p.exitCode === 0) return { available: true };
  if (p.exitCode === null) return { available: false, reason: `${python} did not answer (${p.signalCode ?? "killed"})` };
  const err = p.stderr.toString().trim().split("\n").pop() ?? "";
  return { available: false, reason: `${python} cannot import torch (${err || `exit ${p.exitCode}`}); install Debian's python3-torch or set NLC_TORCH_PYTHON` };
}
