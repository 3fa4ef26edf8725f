/**
 * The `jax:` backend kind end to end (docs/kernels.md#jax): the JAX (lax.scan) and Pallas
 * (pallas_call, interpret=True) delta-rule examples pass C5's forward and backward, and their
 * planted twins fail by name — the JAX one's backward (dk scaled by 1.003), the Pallas one's
 * forward (beta of the previous token). Without JAX for the Python that runs the kernel host
 * (NLC_TORCH_PYTHON, else /usr/bin/python3), those runs are skipped with that reason, and a named
 * jax: backend is unavailable with it. The kind adds at most 5 files over the py: pipeline.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { parsePyBackend } from "../conformance/kernel/python/plan.ts";
import { kindOf } from "../conformance/backend-kinds.ts";
import { cli, expectStatus, expectUnavailable } from "./py-run.ts";
import { treeFiles } from "./tree-copy.ts";

const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";
const torch = probeTorchSync();
/** Why the JAX runs cannot happen here, or null. */
const noJax: string | null = !torch.available ? "no torch"
  : Bun.spawnSync({ cmd: [PYTHON, "-c", "import jax, jax.experimental.pallas"], stdout: "ignore", stderr: "ignore" }).exitCode === 0
  ? null : `jax not importable by ${PYTHON}`;
if (noJax !== null) console.warn(`tests/jax-kind.test.ts: the jax: runs are skipped: ${noJax}`);

const JAX = "jax:examples/jax-kernels/delta_jax.py:delta_jax";
const PALLAS = "jax:examples/jax-kernels/delta_pallas.py:delta_pallas";
const JAX_PLANTED = "jax:examples/jax-kernels/delta_jax_planted.py:delta_jax_dk_scaled";
const PALLAS_PLANTED = "jax:examples/jax-kernels/delta_pallas_planted.py:delta_pallas_beta_shifted";

/** One run of `backends`' delta checks at the quick profile: exit code and results by id. */
function run(backends: string[], env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "nlc-jax-"));
  try {
    const report = join(dir, "report.json");
    const p = cli([...backends.flatMap((b) => ["--backend", b]), "--filter", "C5/jax-", "--rule", "delta", "--profile", "quick", "--seed", "1", "--report", report], env);
    const checks = existsSync(report) ? JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[] : [];
    return { code: p.exitCode, out: p.stderr.toString() + p.stdout.toString(), byId: new Map(checks.map((c) => [c.id, c])) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const get = (r: ReturnType<typeof run>, backend: string, phase: string): CheckResult => {
  const c = r.byId.get(`C5/${parsePyBackend(backend).slug}/delta/${phase}`);
  if (c === undefined) throw new Error(`no result for ${backend} ${phase}:\n${r.out.slice(-3000)}`);
  return c;
};

test("jax: values: their own kind, ids C5/jax-<name>/..., usage errors name the form", () => {
  expect(kindOf(JAX).variable).toBe("NLC_JAX_BACKENDS");
  expect(parsePyBackend(JAX).slug).toBe("jax-delta_jax");
  expect(parsePyBackend(`${JAX}@mine`).slug).toBe("jax-mine");
  expect(parsePyBackend(JAX).callable).toBe("examples/jax-kernels/delta_jax.py#delta_jax");
  expect(() => parsePyBackend("jax:nocallable")).toThrow(/jax:<module>:<callable>/);
  const missing = cli(["--backend", "jax:examples/no-such-kernel.py:fn", "--list"]);
  expect(missing.exitCode).toBe(2);
  expect(missing.stderr.toString()).toContain("no-such-kernel.py does not exist");
  const list = cli(["--backend", JAX, "--list", "--filter", "C5/jax-delta_jax/delta/"]);
  expect(list.stdout.toString().split("\n").filter((l) => l.startsWith("C5/")).sort())
    .toEqual(["C5/jax-delta_jax/delta/backward", "C5/jax-delta_jax/delta/contract", "C5/jax-delta_jax/delta/forward"]);
});

test("the kind is at most 5 files over the py: pipeline, new or edited (examples, tests and docs aside)", () => {
  // every file that names the kind's prefix, variable or adaptor, outside examples/, tests/ and the docs
  const kind = treeFiles().filter((f) => /\.(ts|py)$/.test(f) && !/^(examples|tests|docs)\//.test(f))
    .filter((f) => /JAX_PREFIX|NLC_JAX_BACKENDS|nlc_jax/.test(readFileSync(join(ROOT, f), "utf8")));
  expect(kind.sort()).toEqual(["conformance/backend-kinds.ts", "conformance/kernel/python/plan.ts", "environment.ts", "python/nlc_jax.py"]);
  expect(kind.length).toBeLessThanOrEqual(5);
});

describe.skipIf(!torch.available || noJax === null)("without JAX", () => {
  test("a named jax: backend is unavailable with the reason; its checks are skipped", () => {
    const r = run([JAX]);
    expect(r.code).toBe(1); // it ran nothing of a backend it named (docs/spec/conformance.md#nothing-ran)
    expectUnavailable(get(r, JAX, "forward"), `jax is not importable by ${PYTHON}`);
  }, 300_000);
});

describe.skipIf(noJax !== null)("with JAX: the examples pass, the planted twins fail by name", () => {
  const r = noJax === null ? run([JAX, PALLAS, JAX_PLANTED, PALLAS_PLANTED]) : null;
  test("JAX (lax.scan) and Pallas (interpret=True) examples pass forward and backward", () => {
    for (const b of [JAX, PALLAS]) for (const phase of ["forward", "backward"]) expectStatus(get(r!, b, phase), "pass");
    expect(get(r!, PALLAS, "backward").message).toContain("backward by explicit");
  }, 900_000);
  test("the JAX twin's backward fails naming dk, its forward passes; the Pallas twin's forward fails", () => {
    expect(r!.code).toBe(1);
    expectStatus(get(r!, JAX_PLANTED, "forward"), "pass");
    const bw = get(r!, JAX_PLANTED, "backward");
    expectStatus(bw, "fail");
    expect(bw.message).toContain("dk");
    const fw = get(r!, PALLAS_PLANTED, "forward");
    expectStatus(fw, "fail");
    expect(fw.message).toMatch(/^y \(sequence \d+\): max \|kernel - ref64\|/);
    expect(JSON.stringify(fw)).toContain(`--backend ${PALLAS_PLANTED}`); // its replay line
  });
});
