#!/usr/bin/env node
/**
 * `nlc`: the command of the installed package (`npx nlc ...` after `npm i -D nl-conformance`).
 * Runs conformance/cli.ts under the Bun of the package's own `bun` dependency, so no global Bun
 * is needed, in the directory the command was started in: every path the user gives, the config
 * file and the default report are read from there. Its exit status is the runner's; SIGINT,
 * SIGTERM and SIGHUP are passed on, and SIGTERM when this process's parent dies (the runner then
 * writes its partial report).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));

/**
 * The Bun executable: NLC_BUN, else the `bun` package's binary, else its platform package's (where
 * the package manager did not run bun's install script), else a bun on PATH.
 */
function bunExecutable() {
  if (process.env.NLC_BUN) return process.env.NLC_BUN;
  const req = createRequire(join(root, "package.json"));
  const candidates = [
    ["bun/package.json", "bin/bun.exe"],
    [`@oven/bun-${process.platform}-${process.arch === "arm64" ? "aarch64" : process.arch}/package.json`, "bin/bun"],
  ];
  for (const [pkg, exe] of candidates) {
    try {
      const path = join(dirname(req.resolve(pkg)), exe);
      if (existsSync(path)) return path;
    } catch {
      // not installed beside us
    }
  }
  return "bun";
}

const bun = bunExecutable();
const child = spawn(bun, [join(root, "conformance", "cli.ts"), ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, NLC_COMMAND: "npx nlc" },
});
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    try {
      child.kill(sig);
    } catch {
      // already gone
    }
  });
}
// A parent that dies without passing its signal on (npx ended by SIGTERM does that): SIGTERM, so
// the run stops after the check in flight and writes its partial report.
const parent = process.ppid;
const watch = setInterval(() => {
  if (process.ppid !== parent) {
    clearInterval(watch);
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
  }
}, 500);
watch.unref();
child.on("error", (e) => {
  console.error(`nlc: cannot start Bun (${bun}): ${e.message}; reinstall the package (its dependency 'bun' provides it) or set NLC_BUN`);
  process.exit(2);
});
child.on("exit", (code, signal) => process.exit(code ?? 128 + (signal !== null ? constants.signals[signal] ?? 0 : 0)));
