/**
 * Interrupts: SIGINT/SIGTERM reach the child processes, and an interrupted run leaves the complete
 * report as it was and writes what finished beside it, marked partial.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validateReport } from "../harness/report.ts";
import { ROOT } from "../paths.ts";
import { runEnv } from "./run-env.ts";

const COMPLETE = '{"a complete report": "from an earlier run"}\n';

function parentOf(pid: number): number | null {
  try {
    // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after the last ')'.
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(")").at(-1)!.trim().split(" ")[1]);
  } catch {
    return null;
  }
}

/** Live descendants of `root` whose command line contains `needle`. */
function descendants(root: number, needle: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === root) continue;
    let cmd = "";
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
    } catch {
      continue;
    }
    if (!cmd.includes(needle)) continue;
    for (let p: number | null = parentOf(pid), hops = 0; p !== null && p > 1 && hops < 10; p = parentOf(p), hops++) {
      if (p === root) {
        out.push(pid);
        break;
      }
    }
  }
  return out;
}

async function until<T>(what: string, probe: () => T | null | undefined, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await Bun.sleep(25);
  }
}

function startRun(filter: string, report: string) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "conformance", "cli.ts"), "--filter", filter, "--report", report], {
    cwd: ROOT, stdout: "pipe", stderr: "pipe",
  });
  let out = "";
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  return { proc, out: () => out };
}

function expectPartial(dir: string, report: string): { checks: { id: string }[] } {
  expect(readFileSync(report, "utf8")).toBe(COMPLETE);
  const partial = join(dir, "r.partial.json");
  expect(existsSync(partial)).toBe(true);
  const doc = JSON.parse(readFileSync(partial, "utf8"));
  validateReport(doc);
  expect(doc.partial).toBe(true);
  return doc;
}

test("SIGINT to the CLI: it stops after the check in flight, keeps the complete report, writes the partial one", async () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-int-"));
  const report = join(dir, "r.json");
  writeFileSync(report, COMPLETE);
  const run = startRun("C2", report);
  await until("three checks to finish", () => (/\[\s*3\/\d+\]/.test(run.out()) ? true : null));
  run.proc.kill("SIGINT");
  expect(await run.proc.exited).toBe(130);
  expect(run.out()).toContain("interrupted by SIGINT");
  const doc = expectPartial(dir, report);
  const total = Number(/(\d+) checks, seed/.exec(run.out())![1]);
  expect(doc.checks.length).toBeGreaterThanOrEqual(3);
  expect(doc.checks.length).toBeLessThan(total);
}, 180_000);

test("SIGINT reaching only the kernel child: the run is interrupted, not 'crashed', and the complete report stays", async () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-int-"));
  const report = join(dir, "r.json");
  writeFileSync(report, COMPLETE);
  const run = startRun("C5/cpu-emu", report);
  // The probe child or the batch child, whichever is running: both are the kernel child.
  const child = await until("a C5 child process", () => descendants(run.proc.pid, "kernel/child.ts")[0]);
  process.kill(child, "SIGINT");
  expect(await run.proc.exited).toBe(130);
  expect(run.out()).toContain("interrupted by SIGINT");
  const doc = expectPartial(dir, report);
  // No check is reported as an error because of the interrupt.
  expect(doc.checks.filter((c) => (c as { status?: string }).status === "error")).toEqual([]);
}, 180_000);

test("a signal to a process forwarding interrupts reaches its child, then ends the process as the signal would", async () => {
  const script = `
    import { forwardInterrupts } from ${JSON.stringify(join(ROOT, "oracle", "child-signals.ts"))};
    const child = Bun.spawn(["sleep", "60"]);
    forwardInterrupts(child);
    console.log(child.pid);
    await child.exited;
    await Bun.sleep(60_000);
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  const childPid = Number(first.trim());
  expect(parentOf(childPid)).toBe(proc.pid);
  proc.kill("SIGTERM");
  await proc.exited;
  expect(proc.signalCode).toBe("SIGTERM");
  await until("the child to be gone", () => (parentOf(childPid) === null ? true : null), 10_000);
}, 60_000);

/** Waits for a run started outside this process's view (npm has exited) to leave its partial report. */
async function partialAppears(dir: string, report: string): Promise<{ checks: { id: string }[] }> {
  await until("the partial report", () => (existsSync(join(dir, "r.partial.json")) ? true : null), 120_000);
  await Bun.sleep(200);
  return expectPartial(dir, report);
}

test("SIGTERM to the npm process of `npm run conformance`: the run stops, the complete report stays", async () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-int-"));
  const report = join(dir, "r.json");
  writeFileSync(report, COMPLETE);
  const npm = Bun.spawn(["npm", "run", "conformance", "--", "--filter", "C2", "--report", report], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  let out = "";
  void (async () => {
    for await (const chunk of npm.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  await until("three checks to finish", () => (/\[\s*3\/\d+\]/.test(out) ? true : null));
  npm.kill("SIGTERM");
  const doc = await partialAppears(dir, report);
  expect(doc.checks.length).toBeGreaterThanOrEqual(3);
}, 180_000);

test("a run whose parent died (killed without passing anything on) stops and never overwrites the complete report", async () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-int-"));
  const report = join(dir, "r.json");
  writeFileSync(report, COMPLETE);
  // A shell that waits for the CLI, as npm's script shell does; SIGKILL ends it and passes nothing on.
  const sh = Bun.spawn(["sh", "-c", `${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "conformance", "cli.ts"))} --filter C2 --report ${JSON.stringify(report)}; true`], {
    cwd: ROOT, stdout: "pipe", stderr: "pipe",
  });
  let out = "";
  void (async () => {
    for await (const chunk of sh.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  await until("three checks to finish", () => (/\[\s*3\/\d+\]/.test(out) ? true : null));
  sh.kill("SIGKILL");
  await partialAppears(dir, report);
}, 180_000);

test("SIGINT to `npm test` (conformance/npm-test.ts): bun test stops the run, writes the partial report, and the closing line says so", async () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-int-"));
  const report = join(dir, "r.json");
  writeFileSync(report, COMPLETE);
  const proc = Bun.spawn([process.execPath, join(ROOT, "conformance", "npm-test.ts"), "conformance/conformance.test.ts"], {
    cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...runEnv(), NLC_FILTER: "C2", NLC_REPORT: report },
  });
  let out = "", err = "";
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) err += new TextDecoder().decode(chunk);
  })();
  await until("the run to start", () => (/nl-conformance: \d+ checks/.test(err) ? true : null));
  await Bun.sleep(1500);
  proc.kill("SIGINT");
  expect(await proc.exited).toBe(130);
  const doc = expectPartial(dir, report);
  expect(doc.checks.length).toBeGreaterThan(0);
  expect(out.trim().split("\n").at(-1)).toMatch(/not run: partial, the run was interrupted\)$/);
}, 180_000);
