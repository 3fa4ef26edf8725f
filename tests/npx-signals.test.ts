/**
 * Signals through the installed command's launcher chain, `npx nlc`: npm (npx) runs `sh -c 'nlc
 * ...'`, which runs bin/nlc.js under node, which runs the CLI under bun. npm passes SIGINT and
 * SIGTERM to that shell only; the shell holds a SIGINT until its command ends (so a SIGINT to the
 * npx process alone never reaches the run), and dies of a SIGTERM, whereupon bin/nlc.js sees its
 * parent gone and stops the run. The help says which signal to send where; this shows it true.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { runEnv } from "./run-env.ts";

const hasNpx = Bun.spawnSync({ cmd: ["npx", "--version"], stdout: "pipe", stderr: "pipe" }).exitCode === 0;

/** A kernel repository whose node_modules/.bin/nlc is this checkout's bin/nlc.js (as an install links it). */
function repository(): string {
  const dir = mkdtempSync(join(tmpdir(), "nlc-npx-sig-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "kernels", version: "1.0.0", private: true }));
  mkdirSync(join(dir, "node_modules", ".bin"), { recursive: true });
  symlinkSync(join(ROOT, "bin", "nlc.js"), join(dir, "node_modules", ".bin", "nlc"));
  return dir;
}

async function until(what: string, f: () => boolean, ms = 120_000): Promise<void> {
  const t0 = Date.now();
  while (!f()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(100);
  }
}

test("the help says how to stop `npx nlc`: SIGTERM to the npx process, SIGINT to the process group", () => {
  const help = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--help"], stdout: "pipe" }).stdout.toString().replace(/\s+/g, " ");
  expect(help).not.toContain("Signal the npm (npx) process, the bun process or the process group alike");
  expect(help).toContain("A SIGINT sent to the npx process alone is held by the shell npm runs the command in");
});

test.skipIf(!hasNpx)("SIGTERM to the npx process of `npx nlc`: the run stops and writes its partial report", async () => {
  const dir = repository();
  const report = join(dir, "r.json");
  const npx = Bun.spawn(["npx", "nlc", "--filter", "C2", "--report", report], { cwd: dir, env: runEnv({ NLC_BUN: process.execPath }), stdout: "pipe", stderr: "pipe" });
  let out = "";
  void (async () => {
    for await (const chunk of npx.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  await until("three checks to finish", () => /\[\s*3\/\d+\]/.test(out));
  npx.kill("SIGTERM");
  await until("the partial report", () => existsSync(join(dir, "r.partial.json")));
  await Bun.sleep(200);
  const doc = JSON.parse(readFileSync(join(dir, "r.partial.json"), "utf8")) as { partial?: boolean; checks: unknown[] };
  expect(doc.partial).toBe(true);
  expect(doc.checks.length).toBeGreaterThanOrEqual(3);
  expect(existsSync(report)).toBe(false);
}, 180_000);
