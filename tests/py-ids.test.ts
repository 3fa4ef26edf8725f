/**
 * The ids of a py: kernel's checks come from a declared name, by default the callable's, never
 * from the module's file (docs/spec/py-backend.md#ids): moving or renaming the file keeps them, so
 * `diff` of two reports reads no regression. Two backends of a run with the same ids are a usage
 * error naming both; the replay line carries the backend with its @<name>.
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { parsePyBackend, pyIdCollision } from "../conformance/kernel/python/plan.ts";
import { cli } from "./py-run.ts";

const GOOD = "py:examples/py-kernels/naive_delta.py:naive_delta";

/** The example kernels copied under another directory, the kernel file renamed. */
function moved(): { dir: string; kernel: string; planted: string } {
  const dir = mkdtempSync(join(tmpdir(), "nlc-ids-"));
  copyFileSync("examples/py-kernels/naive_delta.py", join(dir, "naive_delta.py"));
  copyFileSync("examples/py-kernels/naive_delta.py", join(dir, "delta_kernel_v2.py"));
  copyFileSync("examples/py-kernels/naive_delta_planted.py", join(dir, "planted_moved.py"));
  return { dir, kernel: join(dir, "delta_kernel_v2.py"), planted: join(dir, "planted_moved.py") };
}

const list = (args: string[], env: Record<string, string> = {}) => {
  const p = cli([...args, "--filter", "C5/py-", "--rule", "delta", "--list"], env);
  return { code: p.exitCode, ids: p.stdout.toString().split("\n").filter((l) => l.startsWith("C5/py-")).map((l) => l.split(/\s/)[0]), err: p.stderr.toString() };
};

test("the id segment is py-<callable>, or py-<name> with @<name>; names are validated", () => {
  expect(parsePyBackend("py:a/b/k.py:fn").slug).toBe("py-fn");
  expect(parsePyBackend("py:pkg.mod:Kernel").slug).toBe("py-Kernel");
  const named = parsePyBackend("py:a/b/k.py:fn@fn.v2-fast_1");
  expect([named.slug, named.module, named.callable, named.name]).toEqual(["py-fn.v2-fast_1", "a/b/k.py", "fn", "py:a/b/k.py:fn@fn.v2-fast_1"]);
  // an @ in the module's path is the path's
  expect(parsePyBackend("py:dir@1/k.py:fn").module).toBe("dir@1/k.py");
  for (const bad of ["py:k.py:fn@", "py:k.py:fn@a/b", "py:k.py:fn@a b", "py:k.py:fn@a@b"]) {
    expect(() => parsePyBackend(bad)).toThrow(/letters, digits, _, - and \. only/);
  }
  const p = cli(["--backend", "py:examples/py-kernels/naive_delta.py:naive_delta@no/slash", "--list"]);
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain("the name after @ ('no/slash')");
});

test("renaming or moving the kernel's file keeps its check ids; @<name> renames them", () => {
  const { kernel } = moved();
  const here = list(["--backend", GOOD]);
  expect(here.code).toBe(0);
  expect(here.ids).toEqual(["delta/forward", "delta/backward", "delta/contract", "delta.frozen/forward", "delta.frozen/backward"].map((k) => `C5/py-naive_delta/${k}`));
  const there = list(["--backend", `py:${kernel}:naive_delta`]);
  expect(there.code).toBe(0);
  expect(there.ids).toEqual(here.ids);
  const named = list(["--backend", `py:${kernel}:naive_delta@delta_v2`]);
  expect(named.ids).toEqual(here.ids.map((id) => id!.replace("C5/py-naive_delta/", "C5/py-delta_v2/")));
});

test("two backends with the same ids are a usage error naming both and the way out", () => {
  const { kernel } = moved();
  const other = `py:${kernel}:naive_delta`;
  expect(pyIdCollision([GOOD, GOOD])).toBeNull(); // the same backend twice is one backend
  expect(pyIdCollision([GOOD, `${other}@naive_delta`])).toContain("C5/py-naive_delta/");
  const p = list(["--backend", GOOD, "--backend", other]);
  expect(p.code).toBe(2);
  expect(p.err).toContain(`--backend '${GOOD}' and --backend '${other}' would both have the check ids C5/py-naive_delta/...`);
  expect(p.err).toContain(`name one with @<name>, e.g. '${other}@naive_delta_2'`);
  // the same from the environment, named as such
  const env = list([], { NLC_PY_BACKENDS: `${GOOD},${other}` });
  expect(env.code).toBe(2);
  expect(env.err).toContain(`NLC_PY_BACKENDS '${GOOD}' and NLC_PY_BACKENDS '${other}'`);
  // named apart, both run
  const apart = list(["--backend", GOOD, "--backend", `${other}@naive_delta_2`]);
  expect(apart.code).toBe(0);
  expect(apart.ids).toContain("C5/py-naive_delta/delta/forward");
  expect(apart.ids).toContain("C5/py-naive_delta_2/delta/forward");
});

test.skipIf(!probeTorchSync().available)("a named kernel's failing check replays from its line, @<name> and all", () => {
  const { dir, planted } = moved();
  const backend = `py:${planted}:dq_scaled@dq_v2`;
  const report = join(dir, "r.json");
  const id = "C5/py-dq_v2/delta/backward";
  const p = cli(["--backend", backend, "--filter", id, "--profile", "quick", "--report", report]);
  expect(p.exitCode).toBe(1);
  const r = JSON.parse(readFileSync(report, "utf8"));
  const bw = r.checks.find((c: { id: string }) => c.id === id);
  expect(bw.status).toBe("fail");
  expect(bw.replay).toContain(`--backend ${backend} `);
  const again = cli(["--backend", backend, "--replay", /--replay (\S+)/.exec(bw.replay)![1]!]);
  expect(again.exitCode).toBe(1);
  expect(again.stdout.toString()).toContain(`fail    ${id}`);
}, 300_000);
