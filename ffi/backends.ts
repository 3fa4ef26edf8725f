/**
 * Kernel backends: `ref` (the TypeScript reference, the oracle), `cpu-emu` (the .cu sources built
 * with g++ and the CUDA emulation), `cuda` (the same sources built with nvcc), their other precision
 * builds — `cpu-f32` / `cuda-f32` (f32 sums) and the bf16-storage `cpu-bf16` / `cuda-bf16`
 * (docs/spec/kernel-abi.md#bf16-storage) — and `lib:<path>` (any library implementing ffi/nlk.h). Resolving a backend builds what is missing and loads it; the
 * result says whether it can run kernels and, if not, why.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { ruleByKey } from "../src/rules/index.ts";
import type { RuleConfig } from "../src/rules/types.ts";
import { BuildError, buildLib, gpuPresent, isCudaKind, type LibKind } from "./build.ts";
import { libToolchain, type Toolchain } from "./toolchain.ts";
import { openKernelLib } from "./lib.ts";
import { LibraryError, type KernelLib } from "./lib-types.ts";
import type { Environment } from "../environment.ts";

/** A kernel backend as the report lists it. */
export interface BackendInfo {
  name: string;
  available: boolean;
  reason?: string;
  device?: string;
  /** What built and runs its kernels, and the hash of their file (docs/spec/conformance.md#toolchain). */
  toolchain?: Toolchain;
}

/** The backends C5 runs on unless NLC_BACKENDS says otherwise. */
export const DEFAULT_KERNEL_BACKENDS = ["cpu-emu", "cuda"] as const;

/** The backends built from our sources, by the library kind that builds them. */
const BUILT_BACKENDS: Readonly<Record<string, LibKind>> = {
  "cpu-emu": "cpu", "cpu-f32": "cpu-f32", "cpu-bf16": "cpu-bf16", "cpu-test": "cpu-test", cuda: "cuda", "cuda-f32": "cuda-f32", "cuda-bf16": "cuda-bf16",
};

/** The names NLC_BACKENDS (and --backend) accept besides lib:<path>. */
export const NAMED_BACKENDS = ["cpu-emu", "cuda", "cpu-f32", "cuda-f32", "cpu-bf16", "cuda-bf16"] as const;

/** NLC_BACKENDS=cpu-emu,cuda,cpu-bf16,lib:/path/libx.so (comma-separated) of `env`, the start-up record; `ref` is always there. */
export function kernelBackendNames(env: Environment): string[] {
  const raw = env.NLC_BACKENDS;
  if (raw === undefined || raw.trim() === "") return [...DEFAULT_KERNEL_BACKENDS];
  const names = raw.split(",").map((s) => s.trim()).filter((s) => s !== "" && s !== "ref");
  for (const n of names) {
    if (!(NAMED_BACKENDS as readonly string[]).includes(n) && !n.startsWith("lib:")) {
      throw new Error(`NLC_BACKENDS: unknown backend '${n}' (expected ${NAMED_BACKENDS.join(", ")}, or lib:<path to a library implementing ffi/nlk.h>)`);
    }
  }
  return [...new Set(names)];
}

/** A `lib:<path>[@<name>]` backend: the library's file, and the name after @ that its check ids carry. */
export interface LibBackend {
  readonly path: string;
  readonly declared?: string;
}

/** What the name after @ may hold (it names the checks, C5/lib-<name>/...). */
export const LIB_ID_NAME = /^[A-Za-z0-9_.-]+$/;

/** Parses `lib:<path>[@<name>]`: the last @ starts the name when no / follows it (a path may hold @, node_modules/@scope/...). */
export function parseLibBackend(name: string): LibBackend {
  const rest = name.slice(4);
  const at = rest.lastIndexOf("@");
  if (at > 0 && !rest.slice(at + 1).includes("/")) return { path: rest.slice(0, at), declared: rest.slice(at + 1) };
  return { path: rest };
}

/** A backend's id segment in check ids: lib:/a/b/libfoo.so -> lib-libfoo; lib:/a/b/libfoo.so@mine -> lib-mine. */
export function backendSlug(name: string): string {
  if (!name.startsWith("lib:")) return name;
  const lib = parseLibBackend(name);
  if (lib.declared !== undefined) return `lib-${lib.declared}`;
  const base = lib.path.split("/").pop() ?? "lib";
  return `lib-${base.replace(/\.(so|dylib|dll)(\.\d+)*$/, "").replace(/[^A-Za-z0-9_.-]/g, "_")}`;
}

export function stateShapesOf(rule: string, cfg: RuleConfig): Record<string, number[]> {
  return ruleByKey(rule).stateShapes(cfg);
}

export interface Resolved {
  info: BackendInfo;
  /** Present when the backend can run kernels. */
  lib?: KernelLib;
  /** unavailable: a legitimate skip (no GPU, no compiler); broken: the backend should work but does not. */
  problem?: "unavailable" | "broken";
}

async function build(kind: LibKind, log: (s: string) => void): Promise<string> {
  return (await buildLib(kind, { log })).path;
}

/** Builds (if needed), loads and probes one backend. Never throws: problems come back in the result. */
export async function resolveBackend(name: string, log: (s: string) => void = () => {}): Promise<Resolved> {
  if (name === "ref") return { info: { name, available: true, device: "TypeScript reference (oracle)" } };
  let path: string;
  try {
    const kind = BUILT_BACKENDS[name];
    if (kind !== undefined && isCudaKind(kind) && !gpuPresent()) {
      return { info: { name, available: false, reason: "no NVIDIA GPU here (no /dev/nvidia0), so the CUDA build is not made; ffi/ci.sh compiles it (NLC_BUILD_CUDA=1 builds it anyway)" }, problem: "unavailable" };
    }
    if (kind !== undefined) path = await build(kind, log);
    else if (name.startsWith("lib:")) {
      path = resolve(parseLibBackend(name).path);
      if (!existsSync(path)) return { info: { name, available: false, reason: `${path} does not exist` }, problem: "broken" };
    } else return { info: { name, available: false, reason: `unknown backend '${name}'` }, problem: "broken" };
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    // A missing tool is a reason to skip; a compile error is a defect.
    const missing = e instanceof BuildError && /not found/.test(msg) && !/failed/.test(msg);
    return { info: { name, available: false, reason: msg }, problem: missing ? "unavailable" : "broken" };
  }
  let lib: KernelLib;
  try {
    lib = openKernelLib(path, stateShapesOf);
  } catch (e) {
    const msg = e instanceof LibraryError ? e.message : `cannot load ${path}: ${e instanceof Error ? e.message : String(e)}`;
    return { info: { name, available: false, reason: msg }, problem: "broken" };
  }
  const dev = lib.device();
  if (dev.status !== 0) {
    return {
      info: { name, available: false, reason: `every kernel call returns status ${dev.status} (${lib.statusString(dev.status)}); library ${path}` },
      problem: "unavailable",
    };
  }
  // a GPU's name where the library runs on one (a CUDA build of ours, or an external library on a machine with a GPU)
  const kind = BUILT_BACKENDS[name], cuda = kind !== undefined ? isCudaKind(kind) : gpuPresent();
  return { info: { name, available: true, device: dev.name, toolchain: libToolchain(path, cuda ? dev.name : undefined, kind !== undefined && isCudaKind(kind)) }, lib };
}
