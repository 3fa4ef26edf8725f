/**
 * A temporary copy of the working tree for the tests that walk a guide or plant a change in it
 * (tests/adding-a-*.test.ts, tests/c9-plant.ts): the copy, a command run in it, an edit that must
 * change its file, and which files of the copy differ from the tree.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../paths.ts";

/** Every file of the working tree (tracked and untracked, not ignored; not those deleted), relative to the root. */
export function treeFiles(): string[] {
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd: ROOT, stdout: "pipe" });
  return ls.stdout.toString().split("\0").filter((f) => f !== "" && existsSync(join(ROOT, f)));
}

/** A temporary copy of the working tree (treeFiles), node_modules linked; its folder's name starts with prefix. */
export function copyTree(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const f of treeFiles()) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(dir, f));
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** Files of the copy that differ from the working tree, or are new among written (the files a walk wrote), sorted. */
export function changedFiles(dir: string, written: readonly string[]): string[] {
  const changed = treeFiles().filter((f) => readFileSync(join(dir, f), "utf8") !== readFileSync(join(ROOT, f), "utf8"));
  return [...new Set([...changed, ...written.filter((f) => existsSync(join(dir, f)) && !existsSync(join(ROOT, f)))])].sort();
}

/** This Bun running args in dir, one check at a time (NLC_SERIAL); its exit code and its output. */
export function runIn(dir: string, args: string[]): { code: number; out: string } {
  const p = Bun.spawnSync({ cmd: [process.execPath, ...args], cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_SERIAL: "1" } });
  return { code: p.exitCode ?? -1, out: p.stdout.toString() + p.stderr.toString() };
}

/** file of the copy rewritten by f; an edit that changes nothing is an error (the walk no longer matches the file). */
export function editIn(dir: string, file: string, f: (s: string) => string): void {
  const path = join(dir, file);
  const before = readFileSync(path, "utf8");
  const after = f(before);
  if (after === before) throw new Error(`the edit of ${file} changed nothing: the walk no longer matches the file`);
  writeFileSync(path, after);
}
