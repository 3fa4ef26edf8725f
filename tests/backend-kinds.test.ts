/**
 * The table of backend kinds (conformance/backend-kinds.ts, docs/spec/kernel-abi.md#backend-kinds):
 * each --backend value goes to one kind, the native and py: kinds keep their messages and
 * variables, and an in-process kind's entry takes its own values, says what is wrong with another
 * and generates C5 forward and backward for every rule variant from the settings it is given. What
 * the settings and the plan need of a kind (paths made absolute, a kind's own filter, the names the
 * environment gives, a library's preflight) is asked of its entry, not dispatched by prefix.
 */
import { expect, test } from "bun:test";
import { inProcessKind, kindOf, KINDS, backendKindsSpelled } from "../conformance/backend-kinds.ts";
import { RULES } from "../src/rules/index.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { absoluteBackend, kernelOnlyFilters } from "../conformance/settings.ts";
import { catalogueSettings, CLI_NAMES, ENV_NAMES, planRun, preflightBackends, UsageError } from "../conformance/plan.ts";
import type { CatalogueSettings } from "../conformance/catalogue-settings.ts";

/** The settings of a run configuring `backends`. */
const settings = (backends: string[]): CatalogueSettings => ({ backends, namesReference: false, fixtureDirs: [], configLimit: "all" });

test("each value goes to one kind, with the variable that names the kind's backends in the environment", () => {
  expect(KINDS.length).toBe(3);
  expect(kindOf("py:examples/py-kernels/naive_delta.py:naive_delta").variable).toBe("NLC_PY_BACKENDS");
  expect(kindOf("jax:examples/jax-kernels/delta_jax.py:delta_jax").variable).toBe("NLC_JAX_BACKENDS");
  for (const b of ["cpu-emu", "cuda", "lib:/x/libnlk.so", "ref", "nonsense"]) expect(kindOf(b).variable).toBe("NLC_BACKENDS");
  // NLC_BACKENDS unset or empty: the default builds; "ref": none of them
  expect(kindOf("cpu-emu").fromEnvironment({})).toEqual(["cpu-emu", "cuda"]);
  expect(kindOf("cpu-emu").fromEnvironment({ NLC_BACKENDS: "ref" })).toEqual([]);
  expect(kindOf("nonsense").problem("nonsense", "--backend")).toBe(`--backend 'nonsense': unknown backend (expected ${backendKindsSpelled()})`);
  expect(backendKindsSpelled()).toBe("cpu-emu, cuda, cpu-f32, cuda-f32, cpu-bf16, cuda-bf16, lib:<path to a library implementing ffi/nlk.h>[@<name>], py:<module>:<callable>[@<name>], or jax:<module>:<callable>[@<name>]");
  expect(kindOf("lib:").problem("lib:", "--backend")).toContain("a library backend needs a path");
  expect(kindOf("py:nocallable").problem("py:nocallable", "--backend")).toContain("expected py:<module>:<callable>");
  expect(kindOf("jax:nocallable").problem("jax:nocallable", "--backend")).toContain("expected jax:<module>:<callable>");
});

test("an in-process kind takes its prefix, names what it lacks, and generates forward and backward per rule variant", () => {
  const never = () => {
    throw new Error("not made: listing the checks makes no backend");
  };
  const kind = inProcessKind("t:", { a: never });
  expect(kind.owns("t:a") && kind.owns("t:b") && !kind.owns("py:a:b")).toBe(true);
  expect(kind.problem("t:a", "--backend")).toBeNull();
  expect(kind.problem("t:b", "--backend")).toBe("--backend 't:b': no in-process backend 'b' (expected t:<a>)");
  expect(kind.fromEnvironment({ NLC_IN_PROCESS_BACKENDS: "" })).toEqual([]);
  expect(kind.fromEnvironment({ NLC_IN_PROCESS_BACKENDS: "other:x, t:a,t:a" })).toEqual(["t:a"]);
  expect(kind.checks(settings([]))).toEqual([]);
  const s = settings(["other:x", "t:a"]);
  const ids = kind.checks(s).map((c) => c.id).sort();
  const variants = RULES.flatMap((r) => (r.frozen === null ? [r.key] : [r.key, `${r.key}.frozen`]));
  expect(ids).toEqual(variants.flatMap((v) => [`C5/t-a/${v}/backward`, `C5/t-a/${v}/forward`]).sort());
  expect(kind.checks(s).every((c) => c.kind === "delegated" && c.needs.child === "C5 t:a" && c.replayArgs?.join(" ") === "--backend t:a" && c.subject.backend === "t:a")).toBe(true);
  expect(kind.backends(s)).toEqual([{ name: "t:a", available: true, device: "in process (TypeScript)" }]);
});

test("what the settings and the plan ask of a kind is on its entry: paths, its own filter, the environment's names, the preflight", () => {
  const py = "py:examples/py-kernels/naive_delta.py:naive_delta";
  expect(kindOf("lib:rel/libx.so").absolute?.("lib:rel/libx.so", "/w")).toBe("lib:/w/rel/libx.so");
  expect(absoluteBackend("lib:rel/libx.so", "/w")).toBe("lib:/w/rel/libx.so");
  expect(absoluteBackend("cpu-emu", "/w")).toBe("cpu-emu");
  expect(absoluteBackend(py, "/w")).toBe(py);
  // a run naming only py: kernels and no filter runs their checks alone; anything else adds no filter
  expect(kernelOnlyFilters([], [py, `${py}@other`])).toEqual(["C5/py-naive_delta/", "C5/py-other/"]);
  expect(kernelOnlyFilters([], [py, "cpu-emu"])).toEqual([]);
  expect(kernelOnlyFilters(["C1"], [py])).toEqual([]);
  expect(kernelOnlyFilters([], undefined)).toEqual([]);
  const env = { NLC_PY_BACKENDS: ` ${py} ,`, NLC_BACKENDS: "cpu-emu" };
  expect(KINDS.flatMap((k) => k.namedByEnvironment?.(env) ?? [])).toEqual([py]);
  expect(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES }, env).backends).toEqual(["cpu-emu", py]);
  const problem = KINDS.map((k) => k.environmentProblem?.({ NLC_BACKENDS: "nonsense" }) ?? null).find((p) => p !== null);
  expect(problem).toContain("; or py:<module>:<callable> in NLC_PY_BACKENDS");
  // where py: backends go, said once (the native kind's own message names the native backends only)
  expect(problem!.split("NLC_PY_BACKENDS").length - 1).toBe(1);
});

test("a library backend that cannot be loaded is one usage error when a check of it is selected, and is not probed otherwise", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-kinds-"));
  try {
    const lib = join(dir, "libnot.so");
    writeFileSync(lib, "not a shared library\n");
    const plan = (filter: string) => planRun({ seed: 1, profile: "quick", filters: [filter], fixtureDirs: [], reportPath: null, names: CLI_NAMES, backends: [`lib:${lib}`] });
    const selected = plan("C5/lib-libnot/delta/forward");
    expect(selected.defs.length).toBe(1);
    expect(() => preflightBackends(selected)).toThrow(UsageError);
    expect(() => preflightBackends(selected)).toThrow(`--backend lib:${lib}: `);
    // checks of no library backend: nothing to load, no probe
    expect(() => preflightBackends(plan("C1/"))).not.toThrow();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
