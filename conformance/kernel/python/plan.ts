/**
 * What a `py:<module>:<callable>[@<name>]` kernel backend (docs/spec/py-backend.md) passes to the one
 * plan (plan.ts): its name parsed, its id segment and its plan style. Per rule of the registry it
 * gets the checks the contract and the kernel host offer, with ids
 *
 *   C5/py-<name>/<rule>/forward    y and every final state (f32, bf16 or f16 kernel vs f64 reference)
 *   C5/py-<name>/<rule>/backward   every input gradient and d(initial state), given dy and d(final state)
 *   C5/py-<name>/<rule>.frozen/forward|backward   the frozen read: y; dq and the read state's gradient
 *   C5/py-<name>/<rule>/contract   the kernel refuses what it cannot do (contracts.ts)
 *
 * where <name> is the declared name, by default the callable's: the ids do not depend on the
 * module's file, so moving or renaming it keeps them (docs/spec/py-backend.md#ids).
 *
 * Rules the kernel does not declare are no checks of the run: its child marks their skips
 * UNDECLARED_DETAILS, and the report leaves them out (docs/spec/conformance.md#undeclared).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { KERNEL_TOLERANCE } from "../../../oracle/kernel-judge.ts";
import type { Environment } from "../../../environment.ts";
import type { PlanBackend, PlanStyle } from "../plan.ts";
import type { CheckTolerance } from "../tolerance.ts";

export const PY_PREFIX = "py:";
/**
 * `jax:<module>:<callable>[@<name>]`: a JAX function or Pallas kernel declared as a py: kernel is,
 * run by the same host through the adaptor python/nlc_jax.py, which the host loads as
 * `<adaptor>:<module>#<callable>` (docs/kernels.md#jax).
 */
export const JAX_PREFIX = "jax:";
const JAX_ADAPTOR = resolve(import.meta.dir, "../../../python/nlc_jax.py");

/** A parsed `py:` or `jax:` backend; `module` and `callable` are what the kernel host loads (`module`: a dotted name or a path to a .py file). */
export interface PyBackend {
  /** The backend as given (with its @<name>): what the replay line and the report carry. */
  readonly name: string;
  readonly module: string;
  readonly callable: string;
  /** The id segment: py-<name> (jax-<name>), the name declared after @ or else the callable's. */
  readonly slug: string;
}

/** What a declared check-id name may hold. */
const ID_NAME = /^[A-Za-z0-9_.-]+$/;

/** The backend's own module and callable, as written after its prefix. */
function split(name: string): { prefix: string; module: string; callable: string; declared: string | undefined } {
  const prefix = name.startsWith(JAX_PREFIX) ? JAX_PREFIX : PY_PREFIX, kind = prefix.slice(0, -1);
  const rest = name.slice(prefix.length);
  const cut = rest.lastIndexOf(":");
  const module = cut < 0 ? "" : rest.slice(0, cut), tail = cut < 0 ? "" : rest.slice(cut + 1);
  const at = tail.indexOf("@");
  const callable = at < 0 ? tail : tail.slice(0, at), declared = at < 0 ? undefined : tail.slice(at + 1);
  if (!name.startsWith(prefix) || module === "" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(callable)) {
    throw new Error(`--backend '${name}': expected ${prefix}<module>:<callable>[@<name>], e.g. ${prefix === JAX_PREFIX
      ? "jax:examples/jax-kernels/delta_jax.py:delta_jax or jax:mypkg.kernels:delta@delta_v2"
      : "py:examples/py-kernels/naive_delta.py:naive_delta or py:mypkg.kernels:delta@delta_v2"}`);
  }
  if (declared !== undefined && !ID_NAME.test(declared)) {
    throw new Error(`--backend '${name}': the name after @ ('${declared}') names the checks (C5/${kind}-<name>/...): letters, digits, _, - and . only, not empty`);
  }
  return { prefix, module, callable, declared };
}

/** Parses `py:<module>:<callable>[@<name>]` (or `jax:...`); the message of a thrown error names what is wrong. */
export function parsePyBackend(name: string): PyBackend {
  const { prefix, module, callable, declared } = split(name);
  const slug = `${prefix.slice(0, -1)}-${declared ?? callable}`;
  return prefix === JAX_PREFIX ? { name, module: JAX_ADAPTOR, callable: `${module}#${callable}`, slug } : { name, module, callable, slug };
}

/**
 * Two py: (or two jax:) backends of one run whose checks would have the same ids (the same
 * callable's name, or the same @<name>): the message naming both and how to tell them apart, or
 * null. The same backend given twice is one backend.
 */
export function pyIdCollision(names: readonly string[], flag = "--backend"): string | null {
  const seen = new Map<string, string>();
  for (const name of new Set(names)) {
    let slug: string;
    try {
      slug = parsePyBackend(name).slug;
    } catch {
      continue; // a malformed name is reported as such
    }
    const other = seen.get(slug);
    if (other !== undefined) {
      const kind = slug.slice(0, slug.indexOf("-")), own = slug.slice(kind.length + 1);
      return `${flag} '${other}' and ${flag} '${name}' would both have the check ids C5/${slug}/...: ` +
        `name one with @<name>, e.g. '${name}@${own}_2' (ids C5/${kind}-${own}_2/...; docs/spec/py-backend.md#ids)`;
    }
    seen.set(slug, name);
  }
  return null;
}

/** parsePyBackend, and a module given as a file must exist (a command-line value: relative to the working directory). */
export function parsePyBackendArg(name: string): PyBackend {
  const { module } = split(name);
  if (isFileModule(module) && !existsSync(module)) throw new Error(`--backend '${name}': ${resolve(module)} does not exist`);
  return parsePyBackend(name);
}

const isFileModule = (module: string) => module.endsWith(".py") || module.includes("/");

/** The py: backends the start-up record `env` names (NLC_PY_BACKENDS, comma-separated; the jax: ones: NLC_JAX_BACKENDS). */
export function pyBackendNames(env: Environment, variable: "NLC_PY_BACKENDS" | "NLC_JAX_BACKENDS"): string[] {
  const raw = env[variable] ?? "";
  return [...new Set(raw.split(",").map((s) => s.trim()).filter((s) => s !== ""))];
}

/**
 * The flash-attention rule with ref32 from a plain f32 run (docs/spec/py-backend.md#reference):
 * the TypeScript reference's f32 run keeps its backward adjoints in f64, so its error is no
 * measure of what f32 arithmetic gives (measured: the naive delta kernel's dtheta 4.4e-6 off
 * ref64 where that run is 2.8e-7 off; a plain f32 autograd run is in the kernel's range).
 */
export const PY_TOLERANCE: CheckTolerance = {
  ...KERNEL_TOLERANCE,
  ref32: "the PyTorch reference (python/nlc_torch/rules.py) run in f32, forward and autograd backward, on the same inputs " +
    "(mapped in f64 by the kernel's declared conventions, its gradients mapped back: docs/spec/py-backend.md#conventions); " +
    "for a bf16 or f16 kernel its outputs rounded to the kernel's storage dtype and states to its state dtype (docs/spec/py-backend.md#precision)",
  bias: "the bias test against the same yardstick, with the floor of the kernel's storage dtype (docs/spec/precision.md#bias)",
  ref64: "the TypeScript reference pair in f64 (backward with d(final state), docs/spec/state-gradients.md#active)",
};

/** The checks of a py: backend, as the report states them. */
export const PY_STYLE: PlanStyle = {
  tolerance: PY_TOLERANCE,
  subjectDtype: null,
  spec: {
    forward: (decl, frozen) => phaseSpec("forward-check", decl.sheet, frozen),
    backward: (decl, frozen) => phaseSpec("backward-check", decl.sheet, frozen),
    contract: () => "docs/spec/py-backend.md#contracts; docs/spec/py-backend.md#packed",
  },
};

function phaseSpec(anchor: string, sheet: string, frozen: boolean): string {
  return `docs/spec/py-backend.md#${anchor}; docs/spec/conformance.md#c5; ` +
    `${sheet}${frozen ? " (frozen read, docs/spec/state-gradients.md#frozen)" : ""}; docs/spec/precision.md#flash; docs/spec/py-backend.md#precision`;
}

/** A py: backend as the plan sees it: the contract, and the kernel host's refusal probe (docs/spec/py-backend.md#contracts). */
export function pyPlanBackend(b: PyBackend): PlanBackend {
  return { name: b.name, slug: b.slug, offers: ["contract", "refusal"], style: PY_STYLE };
}
