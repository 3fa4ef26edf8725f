/**
 * `declared(...)`, the helper the README's flash-linear-attention adaptor uses, is part of the
 * package (python/nlc_torch/declare.py): importable by a user's adaptor with nothing but the
 * standard library, returning the callable itself with its declaration.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

test("from nlc_torch import declared: the callable, its signature and name, carrying the declaration", () => {
  const script = [
    "import inspect",
    "from nlc_torch import declared",
    "def chunk_rule(q, k, v, beta, scale=None, initial_state=None):",
    "    '''doc'''",
    "    return q + 1",
    "base = declared(chunk_rule, rules=['delta'], names={'theta': 'beta'})",
    "more = declared(base, dtype='bf16')",
    "print(base(1, 2, 3, 4), base.__name__, base.__doc__, list(inspect.signature(base).parameters))",
    "print(sorted(base.nlc.items()), sorted(more.nlc.items()))",
    "try:\n    declared(3)\nexcept TypeError as e:\n    print(e)",
  ].join("\n");
  // the python3 on PATH has no torch: the helper needs none
  const p = Bun.spawnSync({ cmd: ["python3", "-c", script], env: { ...process.env, PYTHONPATH: join(ROOT, "python") }, stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  const [call, decls, err] = p.stdout.toString().trim().split("\n");
  expect(call).toBe("2 chunk_rule doc ['q', 'k', 'v', 'beta', 'scale', 'initial_state']");
  expect(decls).toBe("[('names', {'theta': 'beta'}), ('rules', ['delta'])] [('dtype', 'bf16'), ('names', {'theta': 'beta'}), ('rules', ['delta'])]");
  expect(err).toBe("declared(): expected a callable kernel, got 3");
});

test("no example adaptor defines its own declared()", async () => {
  const glob = new Bun.Glob("examples/py-kernels/*.py");
  for await (const f of glob.scan(ROOT)) {
    expect(`${f}: ${(await Bun.file(join(ROOT, f)).text()).includes("def declared(")}`).toBe(`${f}: false`);
  }
});
