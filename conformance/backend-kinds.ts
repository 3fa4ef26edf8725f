/**
 * The kinds of kernel backend (docs/spec/kernel-abi.md#backend-kinds): one entry per kind, saying
 * which --backend values are its, what is wrong with a value, which environment variable names its
 * backends where --backend does not, the checks it generates for the run's settings
 * (catalogue-settings.ts) and how the report lists them. The plan
 * (plan.ts) and the catalogue (catalogue.ts) go through this table and name no kind; a new kind of
 * backend is one entry here and the module that implements the contract (cases/kernel-backend.ts),
 * as docs/contributing.md "Adding a backend kind" walks.
 */
import { resolve } from "node:path";
import { backendSlug, kernelBackendNames, LIB_ID_NAME, NAMED_BACKENDS, parseLibBackend } from "../ffi/backends.ts";
import type { CheckDef, Handover } from "../harness/check.ts";
import type { BackendInfo } from "../harness/report.ts";
import { kernelBackends, nativeKernelChecks } from "./kernel/native/checks.ts";
import { adoptProbe, probeBackends, probedBackends } from "./kernel/native/spawn.ts";
import { inProcessKernelChecks, type InProcessFactory } from "./kernel/native/in-process.ts";
import { pyBackends, pyKernelChecks } from "./kernel/python/checks.ts";
import { JAX_PREFIX, PY_PREFIX, parsePyBackend, parsePyBackendArg, pyBackendNames, pyIdCollision } from "./kernel/python/plan.ts";
import type { Environment, EnvironmentVariable } from "../environment.ts";
import type { CatalogueSettings } from "./catalogue-settings.ts";

export interface BackendKindEntry {
  /** Whether a --backend value is of this kind (the native kind takes every value no other kind takes). */
  owns(name: string): boolean;
  /** How --backend spells the kind, for messages. */
  readonly spelled: string;
  /** Why a value of this kind cannot be used (the message names `flag` and the value), or null. */
  problem(name: string, flag: string): string | null;
  /** Why this kind's values cannot be used together, or null. */
  together(names: readonly string[], flag: string): string | null;
  /** The environment variable that names its backends where --backend (or the config file) does not; read once, at start-up. */
  readonly variable: EnvironmentVariable;
  /** Its backends as the environment record names them (its variable, its default where unset); throws on a value it cannot take. */
  fromEnvironment(env: Environment): string[];
  /** The checks of its backends among the run's (`settings.backends`). */
  checks(settings: CatalogueSettings): CheckDef[];
  /** Its backends among the run's, for the report, asked for after the checks ran. */
  backends(settings: CatalogueSettings): BackendInfo[];
  /** A value as the run's settings keep it: paths in it made absolute against `cwd` (its child runs elsewhere; the replay line then runs anywhere). */
  absolute?(name: string, cwd: string): string;
  /**
   * The filter that selects this backend's own checks (null: it has none, e.g. one of the suite's
   * own builds): a run (or sweep) that names only backends that have one, and no filter, runs
   * those backends' checks, not the suite's own.
   */
  ownFilter?(name: string): string | null;
  /** Its backends the environment names as explicitly as --backend does (each must run a check). */
  namedByEnvironment?(env: Environment): string[];
  /** What is wrong with its values as the environment record sets them (no --backend given), or null. */
  environmentProblem?(env: Environment): string | null;
  /**
   * Before the first check of `defs` runs: why one of its backends among the run's cannot be used at
   * all (one usage error naming it and `flag`, not an error per check), or null.
   */
  preflight?(defs: readonly CheckDef[], flag: string, settings: CatalogueSettings): string | null;
  /** What the main thread learnt about its backends (a probe) that a worker thread adopts. */
  readonly handover?: Handover;
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Native libraries through ffi/nlk.h: our builds by name (cpu-emu, cuda, ...) and lib:<path>; C5's own checks (kernel/native/checks.ts). */
const NATIVE: BackendKindEntry = {
  owns: () => true,
  spelled: `${NAMED_BACKENDS.join(", ")}, lib:<path to a library implementing ffi/nlk.h>[@<name>]`,
  problem: (b, flag) => {
    if (b === "lib:" || b.trim() === "" || (b.startsWith("lib:") && parseLibBackend(b).path === "")) return `${flag} '${b}': a library backend needs a path, e.g. lib:/path/to/libnlk.so`;
    const declared = b.startsWith("lib:") ? parseLibBackend(b).declared : undefined;
    if (declared !== undefined && !LIB_ID_NAME.test(declared)) {
      return `${flag} '${b}': the name after @ ('${declared}') names the checks (C5/lib-<name>/...): letters, digits, _, - and . only, not empty`;
    }
    if (!(NAMED_BACKENDS as readonly string[]).includes(b) && !b.startsWith("lib:") && b !== "ref") return `${flag} '${b}': unknown backend (expected ${backendKindsSpelled()})`;
    return null;
  },
  // two libraries whose checks would have the same ids (the same file name, or the same @<name>)
  together: (names, flag) => {
    const seen = new Map<string, string>();
    for (const b of new Set(names.filter((n) => n.startsWith("lib:")))) {
      const slug = backendSlug(b), other = seen.get(slug);
      if (other !== undefined) return `${flag} '${other}' and ${flag} '${b}' would both have the check ids C5/${slug}/...: name one with @<name>, e.g. '${b}@${slug.slice(4)}_2'`;
      seen.set(slug, b);
    }
    return null;
  },
  // unset or empty: the default builds; "ref": the reference alone
  variable: "NLC_BACKENDS", fromEnvironment: (env) => kernelBackendNames(env),
  checks: (s) => nativeKernelChecks(nativeOf(s), s.configLimit), backends: (s) => kernelBackends(nativeOf(s)),
  // a library of the user's (lib:<path>) selects its own checks, as a py: kernel does; the suite's own builds select none
  ownFilter: (b) => (b.startsWith("lib:") && b.length > 4 ? `C5/${backendSlug(b)}/` : null),
  absolute: (b, cwd) => {
    if (!b.startsWith("lib:") || b.length <= 4) return b;
    const lib = parseLibBackend(b);
    return `lib:${resolve(cwd, lib.path)}${lib.declared !== undefined ? `@${lib.declared}` : ""}`;
  },
  environmentProblem: (env) => {
    try {
      kernelBackendNames(env);
      return null;
    } catch (e) {
      return `${message(e)}; or py:<module>:<callable> in NLC_PY_BACKENDS`;
    }
  },
  // A library backend (lib:<path>) that cannot be loaded or speaks another ABI version
  // (docs/spec/kernel-abi.md#external), when a check of it is to run. Probed in a child process,
  // like every native load; the probe is kept, so its checks do not load the backends again.
  preflight: (defs, flag, s) => {
    const names = nativeOf(s);
    const libs = names.filter((b) => b.startsWith("lib:") && defs.some((d) => d.subject.backend === b));
    if (libs.length === 0) return null;
    const probed = probeBackends(names);
    for (const name of libs) {
      const p = probed.find((x) => x.info.name === name);
      if (p !== undefined && p.problem === "broken") return `${flag} ${name}: ${p.info.reason}`;
    }
    return null;
  },
  handover: { take: () => probedBackends(), adopt: (v) => adoptProbe(v as ReturnType<typeof probedBackends>) },
};

/**
 * A kind whose kernels the Python kernel host runs (conformance/kernel/python/checks.ts): `py:` (a
 * PyTorch/Triton pair) and `jax:` (a JAX function or Pallas kernel through the adaptor
 * python/nlc_jax.py, docs/kernels.md#jax): one pipeline, told apart by prefix and variable.
 */
function hostedKind(prefix: string, variable: "NLC_PY_BACKENDS" | "NLC_JAX_BACKENDS", device?: string): BackendKindEntry {
  return {
    owns: (b) => b.startsWith(prefix),
    spelled: `${prefix}<module>:<callable>[@<name>]`,
    problem: (b) => {
      try {
        parsePyBackendArg(b);
        return null;
      } catch (e) {
        return message(e);
      }
    },
    together: (names, flag) => pyIdCollision([...names], flag),
    variable, fromEnvironment: (env) => pyBackendNames(env, variable),
    checks: (s) => pyKernelChecks(s.backends.filter((b) => b.startsWith(prefix)), s.configLimit),
    backends: (s) => pyBackends(s.backends.filter((b) => b.startsWith(prefix)), device),
    ownFilter: (b) => {
      try {
        return `C5/${parsePyBackend(b).slug}/`;
      } catch {
        return null; // a malformed name: the plan reports it
      }
    },
    namedByEnvironment: (env) => (env[variable] ?? "").split(",").map((b) => b.trim()).filter((b) => b !== ""),
  };
}

/** py:<module>:<callable>[@<name>]: a PyTorch/Triton pair behind the kernel host (conformance/kernel/). */
const PYTHON = hostedKind(PY_PREFIX, "NLC_PY_BACKENDS");

/** jax:<module>:<callable>[@<name>]: a JAX function or Pallas kernel, declared as a py: kernel is, behind the same host. */
const JAX = hostedKind(JAX_PREFIX, "NLC_JAX_BACKENDS", "JAX through the kernel host (python/nlc_jax.py in python/nlc_torch/kernel_host.py)");

/** Where the values of every in-process kind travel (one variable for all of them: each reads its own prefix). */
const IN_PROCESS_VARIABLE: EnvironmentVariable = "NLC_IN_PROCESS_BACKENDS";

/**
 * A kind of in-process backend, `<prefix><name>`: kernels that run in the checking process and
 * answer at once (kernel/native/in-process.ts), by name. Its checks are C5's forward and backward, with ids
 * C5/<prefix without the colon>-<name>/...
 */
export function inProcessKind(prefix: string, byName: Readonly<Record<string, InProcessFactory>>): BackendKindEntry {
  const spelled = `${prefix}<${Object.keys(byName).join("|")}>`;
  const mine = (s: CatalogueSettings) => s.backends.filter((b) => b.startsWith(prefix));
  const slug = (b: string) => `${prefix.replace(/:$/, "")}-${b.slice(prefix.length)}`;
  return {
    owns: (b) => b.startsWith(prefix),
    spelled,
    problem: (b, flag) => (Object.hasOwn(byName, b.slice(prefix.length)) ? null : `${flag} '${b}': no in-process backend '${b.slice(prefix.length)}' (expected ${spelled})`),
    together: () => null,
    variable: IN_PROCESS_VARIABLE,
    fromEnvironment: (env) => [...new Set((env[IN_PROCESS_VARIABLE] ?? "").split(",").map((b) => b.trim()).filter((b) => b.startsWith(prefix)))],
    checks: (s) => mine(s).flatMap((b) => inProcessKernelChecks(b, slug(b), byName[b.slice(prefix.length)]!)),
    backends: (s) => mine(s).map((b) => ({ name: b, available: true, device: "in process (TypeScript)" })),
  };
}

/** The native backends among the run's: the values no other kind takes. */
function nativeOf(s: CatalogueSettings): string[] {
  return s.backends.filter((b) => kindOf(b) === NATIVE);
}

/** Every kind, in catalogue order; the native kind first (it takes what no other takes). */
export const KINDS: readonly BackendKindEntry[] = [NATIVE, PYTHON, JAX];

/** The kind of a --backend value. */
export function kindOf(name: string): BackendKindEntry {
  return KINDS.find((k) => k !== NATIVE && k.owns(name)) ?? NATIVE;
}

/** Every backend kind --backend accepts, for messages. */
export function backendKindsSpelled(): string {
  const all = KINDS.map((k) => k.spelled);
  return all.length === 1 ? all[0]! : `${all.slice(0, -1).join(", ")}, or ${all.at(-1)}`;
}
