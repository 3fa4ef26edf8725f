/**
 * Checks run in a child process (docs/spec/kernel-abi.md#isolation): code that may crash, abort or
 * hang (a native kernel, a Python kernel host) never runs in the suite's process. One mechanism for
 * every backend that needs it: the protocol the child speaks, starting it, turning its death into
 * one `error` for the check it was running, a fresh child for the checks it did not reach, and the
 * cache that hands each check its result.
 *
 * The child reads a BatchRequest (JSON) on stdin and prints, unbuffered, one line per event:
 *   "@@nlc-start <id>"          before each check
 *   "@@nlc-case <json>"         before each generated case (CaseLine: its seed, path and shape)
 *   "@@nlc-call <symbol>"       before each kernel call
 *   "@@nlc-result <json>"       after each check (its CheckResult)
 * so that the parent knows which check, case and kernel were running when the child died.
 */
import { CALL_TIMEOUT } from "./call-watchdog.ts";
import type { CheckClass, CheckResult, DelegatedResult, DelegateOptions, Profile } from "./check.ts";
import { interruptedBy, noteSignal } from "./interrupt.ts";
import { checkSeed, replayCommand, withProfile } from "./replay-command.ts";
import { childEnvironment } from "../environment.ts";

/**
 * One check a child runs: its id, its part of the plan (serialisable data: the check's kind, rule
 * key, runs, tolerance, ...; each check folder's own type), which the child runs without building
 * the plan again, and for a replay its own seed and fast-check path.
 */
export interface ChildCheckRequest<Part = unknown> {
  id: string;
  part: Part;
  seed?: number;
  path?: string;
  dump?: string;
}

/** A batch of checks for one child: normal runs carry the run seed, a replay its one check's seed and path. */
export interface BatchRequest<Part = unknown> {
  backend: string;
  profile: Profile;
  /** Normal runs: the run seed (each check derives its own, exactly as runCheck does). */
  runSeed?: number;
  /** The checks to run, in order; a replay (no run seed) names its one check's own seed and fast-check path. */
  checks: ChildCheckRequest<Part>[];
}

/** The case a check was running: enough to name it and to replay it. */
export interface CaseLine {
  id: string;
  seed: number;
  path: string;
  /** B, T, H, d, C, hyperparameters. */
  shape: Record<string, unknown>;
}

const START = "@@nlc-start ", RESULT = "@@nlc-result ", CASE = "@@nlc-case ", CALL = "@@nlc-call ";

export const startLine = (id: string): string => `${START}${id}`;
export const resultLine = (r: CheckResult): string => `${RESULT}${JSON.stringify(r)}`;
export const caseLine = (c: CaseLine): string => `${CASE}${JSON.stringify(c)}`;
export const callLine = (symbol: string): string => `${CALL}${symbol}`;

/** What a child printed: its results, and the check, case and kernel call it had started but not finished. */
export interface ChildOutput {
  results: Map<string, CheckResult>;
  running?: string;
  lastCase?: CaseLine;
  lastCall?: string;
}

export function parseRunOutput(stdout: string): ChildOutput {
  const results = new Map<string, CheckResult>();
  let running: string | undefined, lastCase: CaseLine | undefined, lastCall: string | undefined;
  for (const line of stdout.split("\n")) {
    if (line.startsWith(START)) {
      running = line.slice(START.length).trim();
      lastCase = lastCall = undefined;
    } else if (line.startsWith(CASE)) lastCase = JSON.parse(line.slice(CASE.length)) as CaseLine;
    else if (line.startsWith(CALL)) lastCall = line.slice(CALL.length).trim();
    else if (line.startsWith(RESULT)) {
      const r = JSON.parse(line.slice(RESULT.length)) as CheckResult;
      results.set(r.id, r);
      if (running === r.id) running = lastCase = lastCall = undefined;
    }
  }
  return { results, running, lastCase, lastCall };
}

/** A result for a check that did not run its cases (unavailable backend, dead child, unknown id). */
export function stubResult(id: string, status: CheckResult["status"], message: string, seed = 0, path = ""): CheckResult {
  // a check id starts with its class (docs/spec/conformance.md#classes)
  return { id, class: id.split("/")[0] as CheckClass, subject: {}, status, tolerance: {}, runs: 0, seed, path, replay: "", ms: 0, spec: "", message };
}

export function tail(s: string, n = 1500): string {
  const t = s.trim();
  return t.length <= n ? t : `…${t.slice(-n)}`;
}

/**
 * A child's stderr for a message. A fault in native code that Bun has loaded is reported by Bun's
 * crash handler as a crash of Bun itself (a banner of version lines, feature flags and a link, and
 * a line blaming Bun): the banner is reduced to the one line that says what happened, with what
 * the child wrote before it.
 */
export function childStderr(s: string): string {
  const lines = s.split("\n");
  const banner = lines.findIndex((l) => /^=+$/.test(l.trim()) || /^panic[:(]/.test(l.trim()) || /Bun has crashed|indicates a bug in Bun/i.test(l));
  if (banner < 0) return tail(s);
  const fault = lines.slice(banner).find((l) => /^panic[:(]|Segmentation fault|Illegal instruction|Bus error|Floating point|Aborted|SIG[A-Z]+/.test(l.trim()));
  const what = fault === undefined ? "a fault" : fault.trim().replace(/^panic(\([^)]*\))?: /, "");
  const before = tail(lines.slice(0, banner).join("\n"));
  return `${before ? `${before}\n` : ""}panic: ${what} (a fault in native kernel code; Bun's crash handler reports it as its own)`;
}

/** A child's time limit, as data: a base and an allowance per check it runs. */
export interface ChildTimeout {
  readonly baseMs: number;
  readonly perCheckMs: number;
}

/** The limit of a child running `n` checks. */
export const limitMs = (t: ChildTimeout, n: number): number => t.baseMs + t.perCheckMs * n;

/** How a child is started and named. */
export interface ChildSpec {
  /** The command line (the request goes to its stdin). */
  readonly cmd: readonly string[];
  readonly cwd?: string;
  readonly env?: Record<string, string | undefined>;
  /** Pass this process's stderr to the child as fd 3 (NLC_PROGRESS_FD=3): its progress shows live. */
  readonly progressFd?: boolean;
  /** What the messages call the child: "the child process running C5 on cpu-emu". */
  readonly who: string;
  /** The time limit of one child running `n` checks: baseMs + perCheckMs·n. */
  readonly timeout: ChildTimeout;
  /** The setting that time limit comes from, named when a child times out: `NLC_KERNEL_TIMEOUT` (unset: 60 s + 3 s a check). */
  readonly timeoutSetting?: string;
  /** The arguments of a command replaying a case of this backend. */
  readonly replayArgs: readonly string[];
}

export interface SpawnOutcome {
  stdout: string;
  stderr: string;
  /** Set when the child did not finish normally: "killed by SIGSEGV", "timed out after 4 s (killed)". */
  death?: string;
}

/** Starts one child, feeds it `stdin`, waits for it (at most `timeoutMs`, then SIGKILL). */
export function spawnChild(spec: Pick<ChildSpec, "cmd" | "cwd" | "env" | "progressFd" | "timeoutSetting">, timeoutMs: number, stdin?: string): SpawnOutcome {
  const proc = Bun.spawnSync({
    cmd: [...spec.cmd],
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
    stdio: [stdin === undefined ? "ignore" : Buffer.from(stdin), "pipe", "pipe", ...(spec.progressFd ? [2] : [])] as never,
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    env: { ...(spec.env ?? childEnvironment()), ...(spec.progressFd ? { NLC_PROGRESS_FD: "3" } : {}) },
  });
  noteSignal(proc.signalCode); // a child ended by SIGINT/SIGTERM means the run was interrupted
  let death: string | undefined;
  const stdout = proc.stdout.toString();
  // a call's own limit, started when the call started (harness/call-watchdog.ts), expired in the child
  const callLimit = new RegExp(`^${CALL_TIMEOUT.trim()} (\\d+)$`, "m").exec(stdout);
  const ms = Number(callLimit?.[1]);
  if (callLimit !== null && proc.signalCode === "SIGKILL") death = `timed out after ${ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`} from the start of the call (killed)`;
  else if (proc.exitedDueToTimeout) death = `timed out after ${Math.round(timeoutMs / 1000)} s (killed)` + (spec.timeoutSetting === undefined ? "" : `; the limit: ${spec.timeoutSetting}`);
  else if (proc.signalCode !== undefined && proc.signalCode !== null) death = `killed by ${proc.signalCode}`;
  else if (proc.exitCode !== 0) death = `exited with status ${proc.exitCode}`;
  return { stdout, stderr: proc.stderr.toString(), ...(death !== undefined ? { death } : {}) };
}

/** The case that was running, and the command that replays it. */
function crashCase(c: CaseLine | undefined, replayArgs: readonly string[]): string {
  if (c === undefined) return "";
  const sh = c.shape;
  const hyper = sh.hyper && Object.keys(sh.hyper as object).length > 0 ? ` hyper ${JSON.stringify(sh.hyper)}` : "";
  const dims = ["B", "T", "H", "d", "C"].filter((k) => sh[k] !== undefined && sh[k] !== null).map((k) => `${k}=${sh[k]}`).join(" ");
  return `, on the case seed ${c.seed}, path ${c.path} (${dims}${hyper}); replay: ${replayCommand(c.id, c.seed, c.path, [...replayArgs])}`;
}

/** The `error` of the check a child was running when it died: the kernel, the death, the case, the child's stderr. */
function inFlightResult(spec: ChildSpec, req: BatchRequest, out: ChildOutput, death: string, stderr: string): CheckResult {
  const id = out.running!;
  const what = out.lastCall !== undefined
    ? `kernel ${out.lastCall} (backend ${req.backend}): the checking process ${death}`
    : `${spec.who} ${death}`;
  const message = `${what} during this check${crashCase(out.lastCase, withProfile(spec.replayArgs, req.profile))}; the rest of the suite continues` +
    (stderr ? `\nchild stderr: ${stderr}` : "");
  const asked = req.checks.find((c) => c.id === id);
  return stubResult(id, "error", message, out.lastCase?.seed ?? asked?.seed ?? 0, out.lastCase?.path ?? "");
}

/**
 * Runs a batch of checks in children: one child for the batch; when it dies, the check it was
 * running becomes one `error` naming the kernel, the signal or timeout and the case, and a fresh
 * child runs the checks it had not reached. A child that dies outside any check without having
 * reported anything new ends the batch: what is left becomes `error: not run`.
 */
export function runBatch(spec: ChildSpec, req: BatchRequest): Map<string, CheckResult> {
  const results = new Map<string, CheckResult>();
  let left = req.checks;
  while (left.length > 0) {
    const batch: BatchRequest = { ...req, checks: left };
    const timeout = limitMs(spec.timeout, left.length);
    const proc = spawnChild(spec, timeout, JSON.stringify(batch));
    const out = parseRunOutput(proc.stdout);
    const before = results.size;
    for (const [id, r] of out.results) results.set(id, r);
    if (proc.death === undefined) break;
    // an interrupted run starts no fresh child: the check in flight is the interruption's, the rest not run
    if (interruptedBy() !== null) break;
    const stderr = childStderr(proc.stderr);
    const inFlight = out.running !== undefined && !results.has(out.running);
    if (inFlight) results.set(out.running!, inFlightResult(spec, batch, out, proc.death, stderr));
    left = left.filter((c) => !results.has(c.id));
    if (!inFlight && results.size === before) {
      for (const c of left) {
        results.set(c.id, stubResult(c.id, "error", `not run: ${spec.who} ${proc.death}${stderr ? `\nchild stderr: ${stderr}` : ""}`, c.seed ?? 0));
      }
      break;
    }
  }
  return results;
}

/** A check of a backend's batch: its id and its part of the plan (the parent built the plan; the child does not). */
export interface BatchEntry<Part> {
  readonly id: string;
  readonly part: Part;
}

/**
 * Results by check id, seed and profile: the first check of a backend that runs asks for every
 * selected sibling in one batch (`request`), its caller runs the batch in children (runBatch) and
 * keeps the results (`keep`); the others find their result here (`cached`).
 */
export class ChildResults {
  private readonly cache = new Map<string, CheckResult>();

  private static key(id: string, seed: number, profile: Profile): string {
    return `${id}|${seed}|${profile}`;
  }

  /** The result of check `id` at the options' seed and profile, if a batch gave it. */
  cached(id: string, opts: DelegateOptions): DelegatedResult | undefined {
    const r = this.cache.get(ChildResults.key(id, opts.seed, opts.profile));
    return r === undefined ? undefined : {
      status: r.status, runs: r.runs, seed: r.seed, path: r.path, worst: r.worst ?? undefined, message: r.message, ms: r.ms,
      ...(r.details ? { details: r.details } : {}),
    };
  }

  /** The batch that answers check `id` of `backend`: a replay alone; else every selected sibling (`siblings`: the backend's checks, in order). */
  static request<Part>(backend: string, id: string, opts: DelegateOptions, siblings: readonly BatchEntry<Part>[]): BatchRequest<Part> {
    const { seed, runSeed, profile, replayPath, replayDump, selected } = opts;
    const part = (cid: string): Part => {
      const e = siblings.find((c) => c.id === cid);
      if (e === undefined) throw new Error(`no check '${cid}' on backend ${backend} in the plan`);
      return e.part;
    };
    return replayPath !== undefined
      ? { backend, profile, checks: [{ id, part: part(id), seed, path: replayPath, ...(replayDump !== undefined ? { dump: replayDump } : {}) }] }
      : { backend, profile, runSeed, checks: siblings.filter((c) => c.id === id || selected.has(c.id)).map((c) => ({ id: c.id, part: c.part })) };
  }

  /** A batch's results, kept under each check's seed; then the result of check `id`. */
  keep(req: BatchRequest, results: ReadonlyMap<string, CheckResult>, id: string, opts: DelegateOptions): DelegatedResult {
    for (const [cid, res] of results) {
      this.cache.set(ChildResults.key(cid, req.runSeed !== undefined ? checkSeed(req.runSeed, cid) : opts.seed, opts.profile), res);
    }
    const r = this.cached(id, opts);
    if (r === undefined) throw new Error(`the ${req.backend} child process returned no result for ${id}`);
    return r;
  }
}
