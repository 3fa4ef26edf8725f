/** One live `python -m nlc_torch.bridge` process: spawning, the handshake, framing replies, death and timeouts. */
import { Tensor } from "../src/tensor.ts";
import { forwardInterrupts } from "./child-signals.ts";
import { type BridgeOptions, type TensorRecord, TorchBridgeError } from "./torch-protocol.ts";
import { Decoder, type Message } from "./torch-wire.ts";
import { childEnvironment, environment } from "../environment.ts";

const PYTHON_DIR = decodeURIComponent(new URL("../python", import.meta.url).pathname);
const STDERR_TAIL = 4000;

/** The environment the project's Python modules run in: python/ on the path, no bytecode files, unbuffered. */
export function pythonEnv(): Record<string, string> {
  const env = childEnvironment();
  env.PYTHONPATH = env.PYTHONPATH ? `${PYTHON_DIR}:${env.PYTHONPATH}` : PYTHON_DIR;
  env.PYTHONDONTWRITEBYTECODE = "1";
  env.PYTHONUNBUFFERED = "1";
  return env;
}

/**
 * `python -m MODULE` through the zygote (python/nlc_zygote.py, docs/spec/conformance.md#zygote:
 * torch imported once, a fork per process), unless NLC_TORCH_ZYGOTE=0 asks for a Python of its own.
 */
export function moduleCommand(python: string, module: string, env: Record<string, string | undefined>): string[] {
  return env.NLC_TORCH_ZYGOTE === "0" ? [python, "-m", module] : [python, "-m", "nlc_zygote", module];
}

export function defaultPython(opts: BridgeOptions): string {
  return opts.python ?? environment().NLC_TORCH_PYTHON ?? "/usr/bin/python3";
}

interface Pending {
  resolve(m: Message): void;
  reject(e: Error): void;
}

/** One live bridge process. */
export class Proc {
  readonly sub: ReturnType<typeof Bun.spawn>;
  private readonly decoder = new Decoder();
  private readonly waiting: Pending[] = [];
  private stderrTail = "";
  private writeError: string | null = null;
  dead: TorchBridgeError | null = null;
  /**
   * The bridge's own pid where it is not `sub` (its hello says: a child of the zygote, which `sub`,
   * the launcher, mirrors); killed together with `sub`.
   */
  childPid: number | null = null;
  readonly exited: Promise<void>;

  constructor(readonly python: string, opts: BridgeOptions) {
    const env = pythonEnv();
    if (opts.threads !== undefined) env.NLC_TORCH_THREADS = String(opts.threads);
    try {
      this.sub = Bun.spawn(moduleCommand(python, "nlc_torch.bridge", env), { stdin: "pipe", stdout: "pipe", stderr: "pipe", env });
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

  request(bytes: Uint8Array, what: string, timeoutMs: number, setting?: string): Promise<Message> {
    if (this.dead !== null) return Promise.reject(this.dead);
    return new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        const e = new TorchBridgeError("timeout",
          `torch bridge: ${what} timed out after ${timeoutMs} ms` + (setting === undefined ? "" : ` (the limit: ${setting}; raise it for a slow kernel)`) +
          "; the bridge process was killed (the next request starts a new one)" +
          (this.stderrTail.trim() ? `; stderr tail:\n${this.stderrTail.trim()}` : ""));
        this.fail(e);
        this.kill();
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
    if (this.childPid !== null) {
      try {
        process.kill(this.childPid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }

  endInput(): void {
    try {
      void (this.sub.stdin as import("bun").FileSink).end();
    } catch {
      // already closed
    }
  }
}

export function replyError(h: Record<string, any>, what: string): TorchBridgeError | null {
  if (h.ok === true) return null;
  return new TorchBridgeError("request", `torch bridge: ${what}: ${String(h.error ?? "request failed")}`);
}

export function prefixed(tensors: Map<string, Tensor>, prefix: string): TensorRecord {
  const out: TensorRecord = {};
  for (const [n, t] of tensors) {
    if (!n.startsWith(prefix)) continue;
    const rest = n.slice(prefix.length);
    if (!rest.includes(".")) out[rest] = t;
  }
  return out;
}
