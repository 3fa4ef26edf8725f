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
import { closeSync, existsSync, openSync, readSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));

/** Whether path is a native executable (ELF, Mach-O or PE), not the script `bun` installs as its placeholder. */
function isNative(path) {
  let fd;
  try {
    fd = openSync(path, "r");
    const head = Buffer.alloc(4);
    if (readSync(fd, head, 0, 4, 0) < 4) return false;
    const magic = head.readUInt32BE(0);
    return magic === 0x7f454c46 || head.readUInt16BE(0) === 0x4d5a || [0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe].includes(magic);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Whether this Linux runs musl (no glibc version in Node's own report). */
function isMusl() {
  if (process.platform !== "linux") return false;
  try {
    return !process.report.getReport().header.glibcVersionRuntime;
  } catch {
    return existsSync("/etc/alpine-release");
  }
}

/**
 * The Bun executable: NLC_BUN, else the `bun` package's binary, else (where the package manager did
 * not run bun's install script, which replaces `bun/bin/bun.exe`, a placeholder script, by the
 * binary: `--ignore-scripts`, pnpm) the binary of its platform package `@oven/bun-<os>-<arch>…`,
 * installed beside it as an optional dependency; else a bun on PATH. Nothing is downloaded.
 */
function bunExecutable() {
  if (process.env.NLC_BUN) return process.env.NLC_BUN;
  const req = createRequire(join(root, "package.json"));
  const found = (pkg, exe) => {
    try {
      const path = join(dirname(req.resolve(`${pkg}/package.json`)), exe);
      return existsSync(path) ? path : undefined;
    } catch {
      return undefined; // not installed beside us
    }
  };
  const own = found("bun", "bin/bun.exe");
  if (own !== undefined && isNative(own)) return own;
  const os = process.platform === "win32" ? "windows" : process.platform;
  const arch = process.arch === "arm64" ? "aarch64" : process.arch;
  const abis = isMusl() ? ["-musl", "-musl-baseline", "", "-baseline"] : process.platform === "android" ? ["-android"] : ["", "-baseline"];
  for (const abi of abis) {
    const path = found(`@oven/bun-${os}-${arch}${abi}`, os === "windows" ? "bin/bun.exe" : "bin/bun");
    if (path !== undefined && isNative(path)) return path;
  }
  if (own === undefined) return "bun";
  // the placeholder is also node_modules/.bin/bun, first on the PATH npx gives: a bun on PATH that is not it
  const placeholder = realpathSync(own);
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const path = join(dir, os === "windows" ? "bun.exe" : "bun");
    try {
      if (dir !== "" && realpathSync(path) !== placeholder) return path;
    } catch {
      // none here
    }
  }
  console.error(
    `nlc: ${own} is Bun's placeholder (its install script did not run) and no platform package @oven/bun-${os}-${arch} is installed beside it; ` +
      "install without --omit=optional, run 'npm rebuild bun', or set NLC_BUN to a Bun executable",
  );
  process.exit(2);
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
