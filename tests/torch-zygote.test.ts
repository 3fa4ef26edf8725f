/**
 * The zygote (python/nlc_zygote.py, docs/spec/conformance.md#zygote): a bridge or kernel host is a
 * fork of a Python that imported torch once, and the launcher the suite spawns behaves as that
 * process would: its stdio, environment, directory and arguments are the caller's, its exit code
 * and the signal that killed it are mirrored, and killing the launcher kills the child.
 * NLC_TORCH_ZYGOTE=0 runs the module in a Python of its own. Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";
const DIR = join(ROOT, "tests", "py-kernels");

interface Probe { pid: number; ppid: number; torch_preloaded: boolean; cwd: string; argv: string[]; env: string | null }

function launch(mode: string, env: Record<string, string> = {}) {
  return Bun.spawn([PYTHON, "-m", "nlc_zygote", "zygote_probe", ...(mode ? [mode] : [])], {
    cwd: DIR, stdin: "pipe", stdout: "pipe", stderr: "pipe",
    env: { ...process.env, PYTHONPATH: join(ROOT, "python"), NLC_ZYGOTE_PROBE: "from the caller", ...env },
  });
}

async function firstLine(p: ReturnType<typeof launch>): Promise<Probe> {
  const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return JSON.parse(text.split("\n")[0]!) as Probe;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(!probeTorchSync().available)("the torch zygote", () => {
  test("the child has torch imported, the caller's cwd, args, environment and stdio; its exit code is the launcher's", async () => {
    const first = launch(""); // a first request starts the zygote (or finds it)
    (first.stdin as import("bun").FileSink).end();
    expect(await first.exited).toBe(0);
    const p = launch("exit3");
    (p.stdin as import("bun").FileSink).write("hello\n");
    (p.stdin as import("bun").FileSink).end();
    expect(await p.exited).toBe(3);
    const out = await new Response(p.stdout as ReadableStream).text();
    const probe = JSON.parse(out.split("\n")[0]!) as Probe;
    expect(probe.torch_preloaded).toBe(true);
    expect(probe.ppid).not.toBe(p.pid); // a child of the zygote, not of the launcher
    expect(probe.cwd).toBe(DIR);
    expect(probe.argv).toEqual(["exit3"]);
    expect(probe.env).toBe("from the caller");
    expect(out).toContain("echo hello");
    expect(await new Response(p.stderr as ReadableStream).text()).toContain("about to exit with 3");
  }, 90_000);

  test("a child killed by a signal kills the launcher with the same signal", async () => {
    const p = launch("abort");
    (p.stdin as import("bun").FileSink).end();
    await p.exited;
    expect(p.signalCode).toBe("SIGABRT");
  }, 90_000);

  test("killing the launcher kills the child (nothing outlives its caller)", async () => {
    const p = launch("hang");
    const probe = await firstLine(p);
    expect(alive(probe.pid)).toBe(true);
    p.kill("SIGKILL");
    await p.exited;
    const t0 = Date.now();
    while (alive(probe.pid) && Date.now() - t0 < 5000) await Bun.sleep(20);
    expect(alive(probe.pid)).toBe(false);
  }, 90_000);

  test("SIGTERM to the launcher reaches the child", async () => {
    const p = launch("hang");
    const probe = await firstLine(p);
    p.kill("SIGTERM");
    await p.exited;
    expect(p.signalCode).toBe("SIGTERM");
    expect(alive(probe.pid)).toBe(false);
  }, 90_000);

  test("NLC_TORCH_ZYGOTE=0: the module runs in a Python of its own", async () => {
    const p = launch("", { NLC_TORCH_ZYGOTE: "0" });
    (p.stdin as import("bun").FileSink).end();
    const probe = await firstLine(p);
    expect(probe.torch_preloaded).toBe(false);
    expect(probe.pid).toBe(p.pid); // exec'd in place
    expect(await p.exited).toBe(0);
  }, 90_000);
});
