/**
 * The installed package, as a kernel repository gets it: `npm pack` of this repository, installed
 * from the tarball into a directory of its own, commands run there with none of this suite's
 * settings and no Bun on PATH. Shared by the tests of the installed command and of the pytest plugin.
 * Needs npm (the registry or its cache, for the package's dependencies).
 */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { ROOT } from "../paths.ts";

export const hasNpm = Bun.spawnSync({ cmd: ["npm", "--version"], stdout: "pipe", stderr: "pipe" }).exitCode === 0;

/** PATH without any directory that holds a bun: the installed command must bring its own. */
export const PATH = (process.env.PATH ?? "").split(delimiter).filter((d) => d !== "" && !existsSync(join(d, "bun"))).join(delimiter);

/** The environment of a kernel repository's CI: none of this suite's NLC_* settings, no Bun on PATH. */
export const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("NLC_") && !k.startsWith("npm_"))) as Record<string, string>;

export interface Ran {
  code: number;
  out: string;
  timedOut: boolean;
}

/** cmd in cwd, ended after `timeout` ms (a registry that stops answering must not hang the suite: the test's own limit cannot end a synchronous spawn). */
export function sh(cmd: string[], cwd: string, env: Record<string, string> = {}, timeout = 300_000): Ran {
  const r = Bun.spawnSync({ cmd, cwd, env: { ...ENV, PATH, ...env }, stdout: "pipe", stderr: "pipe", timeout });
  const out = r.stdout.toString() + r.stderr.toString();
  return { code: r.exitCode, out: r.exitedDueToTimeout ? `${cmd.join(" ")}: no answer in ${timeout / 1000} s\n${out}` : out, timedOut: r.exitedDueToTimeout === true };
}

/** `npm pack` of this repository into dir; the tarball's path. */
export function pack(dir: string): string {
  const r = sh(["npm", "pack", "--silent", "--pack-destination", dir], ROOT);
  if (r.code !== 0) throw new Error(`npm pack failed:\n${r.out}`);
  return join(dir, readdirSync(dir).find((f) => f.endsWith(".tgz"))!);
}

/**
 * A kernel repository at dir: a package.json, the given files, one git commit; the commit's hash.
 */
export function kernelRepository(dir: string, files: Record<string, string>): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "kernel-repo", private: true }));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  sh(["git", "init", "-q"], dir);
  sh(["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "add", "-A"], dir);
  sh(["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-q", "--allow-empty", "-m", "kernel"], dir);
  return sh(["git", "rev-parse", "HEAD"], dir).out.trim();
}

/** `npm i -D <tarball> [flags]` in repo, from the cache where it can; once more after a registry that stopped answering. */
export function installTarball(repo: string, tarball: string, flags: string[] = []): Ran {
  const once = () => sh(["npm", "install", "--save-dev", "--no-audit", "--no-fund", "--prefer-offline", "--fetch-timeout=60000", ...flags, tarball], repo, {}, 150_000);
  const first = once();
  return first.timedOut ? once() : first;
}
