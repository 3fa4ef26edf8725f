/**
 * Builds the kernel libraries from cuda/*.cu (the kernel pairs) — the
 * same .cu sources two ways, after regenerating cuda/gen/ and the header (ffi/generate.ts):
 *   cpu       build/libnlk-cpu.so        g++ -x c++ with the emulation header (cuda/portable.cuh)
 *   cpu-f32   build/libnlk-cpu-f32.so    the cpu build summing and carrying adjoints in f32 (-DNLK_ACC=float
 *                                        -DNLK_ADJ=float): a plain f32 kernel (docs/spec/precision.md)
 *   cpu-chunkgd  build/libnlk-cpu-chunkgd.so  the cpu build with the Delta pair as chunk-start GD with chunks
 *                                        of 4 tokens (-DNLK_DELTA_CHUNK_GD=4; docs/spec/kernel-abi.md#chunk-form)
 *   cpu-test  build/libnlk-cpu-test.so   the cpu objects plus cuda/test/*.cu (planted crashes, races)
 *   cpu-tsan  build/libnlk-cpu-tsan.so   the cpu build with -fsanitize=thread (thread mode)
 *   cpu-bf16  build/libnlk-cpu-bf16.so   the cpu-f32 build with bf16 storage (-DNLK_STORAGE_BF16=1): every
 *                                        per-token tensor and gate crossing the ABI is bf16, states f32
 *                                        (docs/spec/kernel-abi.md#bf16-storage)
 *   cuda      build/libnlk-cuda.so       nvcc -arch=sm_90 (SASS + PTX), static cudart
 *   cuda-f32  build/libnlk-cuda-f32.so   the cuda build with the flags of cpu-f32
 *   cuda-bf16 build/libnlk-cuda-bf16.so  the cuda build with the flags of cpu-bf16
 * Incremental: each object is rebuilt only when its source, a header, the compiler or the flags
 * change (content hashes, not mtimes), and sources compile in parallel.
 *
 *   bun ffi/build.ts [cpu|cpu-f32|cpu-bf16|cpu-chunkgd|cpu-test|cpu-tsan|cuda|cuda-f32|cuda-bf16|all]   build (default: cpu)
 *   bun ffi/build.ts --check-cuda     compile every kernel for sm_90, f32 and bf16 storage (CI gate)
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, join } from "node:path";

import { ROOT } from "../paths.ts";
import { writeGenerated } from "./generate.ts";
import { environment, type Environment } from "../environment.ts";

const CUDA_DIR = join(ROOT, "cuda");
const TEST_DIR = join(CUDA_DIR, "test");
export const BUILD_DIR = join(ROOT, "build");

export type LibKind = "cpu" | "cpu-f32" | "cpu-bf16" | "cpu-chunkgd" | "cpu-test" | "cpu-tsan" | "cuda" | "cuda-f32" | "cuda-bf16";
export const LIB_KINDS: readonly LibKind[] = ["cpu", "cpu-f32", "cpu-bf16", "cpu-chunkgd", "cpu-test", "cpu-tsan", "cuda", "cuda-f32", "cuda-bf16"];

/** The pure-f32 kernels (f32 sums, f32 adjoints). */
const F32_FLAGS = ["-DNLK_ACC=float", "-DNLK_ADJ=float"];
/** bf16 storage around the pure-f32 kernels (cuda/storage.cuh). */
const BF16_FLAGS = [...F32_FLAGS, "-DNLK_STORAGE_BF16=1"];

const isCuda = (kind: LibKind): boolean => kind === "cuda" || kind === "cuda-f32" || kind === "cuda-bf16";

/** The chunk size of the cpu-chunkgd build's chunk-start GD Delta pair. */
export const CHUNK_GD_BUILD_C = 4;

/**
 * Whether a CUDA library built here could run: an NVIDIA GPU's device node exists. Without one the
 * conformance run does not build the cuda backends (their checks are skipped with the reason); the
 * compile gate for them is `bun ffi/build.ts --check-cuda` in ffi/ci.sh. NLC_BUILD_CUDA=1 builds
 * them anyway (e.g. to try a GPU machine's build here).
 */
export function gpuPresent(env: Environment = environment()): boolean {
  return env.NLC_BUILD_CUDA === "1" || existsSync("/dev/nvidia0") || existsSync("/dev/nvidiactl");
}

export function isCudaKind(kind: LibKind): boolean {
  return isCuda(kind);
}

export function libPath(kind: LibKind): string {
  return join(BUILD_DIR, `libnlk-${kind}.so`);
}

/** A build that cannot run or did not succeed; the message says what to install or what failed. */
export class BuildError extends Error {}

interface Toolchain {
  compiler: string;
  /** Flags for one translation unit (before -c src -o obj). */
  compile(src: string): string[];
  link(objs: string[], out: string): string[];
}

const CPU_FLAGS = ["-std=c++20", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-pthread"];

function cpuToolchain(extra: string[]): Toolchain {
  return {
    compiler: "g++",
    compile: (src) => [...CPU_FLAGS, ...extra, ...(src.endsWith(".cu") ? ["-x", "c++"] : []), `-I${CUDA_DIR}`],
    link: (objs, out) => ["g++", "-shared", "-pthread", ...extra, "-o", out, ...objs],
  };
}

const NVCC_FLAGS = [
  "-std=c++20", "-O2", "-arch=sm_90", "-Xcompiler", "-fPIC,-fvisibility=hidden,-Wall", "--Werror", "all-warnings",
];

function cudaToolchain(extra: string[]): Toolchain {
  return {
    compiler: "nvcc",
    compile: (src) => [...NVCC_FLAGS, ...extra, ...(src.endsWith(".cu") ? ["-x", "cu"] : []), `-I${CUDA_DIR}`],
    // Static cudart (no libcudart.so needed at run time), and none of its symbols exported.
    link: (objs, out) => ["nvcc", "-shared", "-cudart", "static", "-arch=sm_90", "-Xlinker", "--exclude-libs,ALL", "-o", out, ...objs],
  };
}

function which(cmd: string): string | null {
  return Bun.which(cmd) ?? (cmd === "nvcc" && existsSync("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : null);
}

function toolVersion(cmd: string): string {
  const r = Bun.spawnSync({ cmd: [cmd, "--version"], stdout: "pipe", stderr: "pipe" });
  return r.stdout.toString().trim();
}

function listSources(dir: string, exts: string[]): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => exts.some((e) => f.endsWith(e))).sort().map((f) => join(dir, f));
}

/** Every source that goes into a library of this kind. */
export function sourcesOf(kind: LibKind): string[] {
  const kernels = listSources(CUDA_DIR, [".cu"]);
  if (isCuda(kind)) return kernels;
  const runtime = join(CUDA_DIR, "emu_runtime.cpp");
  return kind === "cpu-test" ? [...kernels, runtime, ...listSources(TEST_DIR, [".cu"])] : [...kernels, runtime];
}

function headersHash(): string {
  const h = createHash("sha256");
  const gen = join(CUDA_DIR, "gen");
  for (const f of [...listSources(CUDA_DIR, [".cuh", ".h"]), ...listSources(gen, [".cuh", ".inc"]), join(ROOT, "ffi", "nlk.h")]) h.update(f).update(readFileSync(f));
  return h.digest("hex");
}

function hashOf(...parts: string[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex").slice(0, 32);
}

function readKey(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function toolchainFor(kind: LibKind): { tc: Toolchain; objDir: string } {
  if (kind === "cuda") return { tc: cudaToolchain([]), objDir: join(BUILD_DIR, "obj", "cuda") };
  if (kind === "cuda-bf16") return { tc: cudaToolchain(BF16_FLAGS), objDir: join(BUILD_DIR, "obj", "cuda-bf16") };
  if (kind === "cuda-f32") return { tc: cudaToolchain(F32_FLAGS), objDir: join(BUILD_DIR, "obj", "cuda-f32") };
  if (kind === "cpu-bf16") return { tc: cpuToolchain(BF16_FLAGS), objDir: join(BUILD_DIR, "obj", "cpu-bf16") };
  if (kind === "cpu-tsan") return { tc: cpuToolchain(["-fsanitize=thread", "-DNLK_TSAN=1"]), objDir: join(BUILD_DIR, "obj", "cpu-tsan") };
  if (kind === "cpu-chunkgd") return { tc: cpuToolchain([`-DNLK_DELTA_CHUNK_GD=${CHUNK_GD_BUILD_C}`]), objDir: join(BUILD_DIR, "obj", "cpu-chunkgd") };
  if (kind === "cpu-f32") return { tc: cpuToolchain(F32_FLAGS), objDir: join(BUILD_DIR, "obj", "cpu-f32") };
  return { tc: cpuToolchain([]), objDir: join(BUILD_DIR, "obj", "cpu") };
}

function requireTools(kind: LibKind): string {
  if (isCuda(kind)) {
    const nvcc = which("nvcc");
    if (nvcc === null) throw new BuildError("nvcc not found (install the CUDA toolkit, e.g. Debian 'nvidia-cuda-toolkit', or put /usr/local/cuda/bin on PATH)");
    return nvcc;
  }
  const gxx = which("g++");
  if (gxx === null) throw new BuildError("g++ not found: the cpu-emu backend needs a C++20 compiler (Debian: apt-get install g++)");
  if (!existsSync("/usr/include/ucontext.h") && !existsSync("/usr/include/x86_64-linux-gnu/sys/ucontext.h")) {
    throw new BuildError("ucontext.h not found: the cpu-emu fibers need the glibc headers (Debian: apt-get install libc6-dev)");
  }
  return gxx;
}

export interface BuildResult {
  path: string;
  /** Objects compiled by this call (0 when everything was up to date). */
  compiled: number;
  linked: boolean;
}

async function run(cmd: string[], what: string): Promise<void> {
  const p = Bun.spawn({ cmd, stdout: "pipe", stderr: "pipe", cwd: ROOT });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new BuildError(`${what} failed (exit ${code}):\n$ ${cmd.join(" ")}\n${(err + out).trim()}`);
}

async function parallel<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  const errors: unknown[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const it = items[next++]!;
      try {
        await fn(it);
      } catch (e) {
        errors.push(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (errors.length > 0) throw new BuildError(errors.map((e) => (e instanceof Error ? e.message : String(e))).join("\n\n"));
}

const LOCK_DIR = join(BUILD_DIR, ".lock");
let lockDepth = 0;

function lockHolderAlive(): boolean {
  const pid = Number(readKey(join(LOCK_DIR, "pid")) ?? NaN);
  if (!Number.isInteger(pid)) return true; // being created: its holder writes the pid next
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * One build at a time per build directory: the suite's workers and child processes may each ask
 * for a library at once (the kernel probe and the crash-isolation check both need the cpu objects),
 * and on a fresh checkout two processes would compile the same sources twice. The lock is a
 * directory (created atomically) holding its owner's pid; a dead owner's lock is taken over.
 */
async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  if (lockDepth > 0) return fn(); // this process already holds it
  mkdirSync(BUILD_DIR, { recursive: true });
  let since = performance.now();
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      // a missing pid for more than a few seconds means its creator died between the two steps
      if (!lockHolderAlive() || (readKey(join(LOCK_DIR, "pid")) === null && performance.now() - since > 5000)) {
        rmSync(LOCK_DIR, { recursive: true, force: true });
        since = performance.now();
        continue;
      }
      await Bun.sleep(100);
    }
  }
  writeFileSync(join(LOCK_DIR, "pid"), String(process.pid));
  lockDepth++;
  try {
    return await fn();
  } finally {
    lockDepth--;
    rmSync(LOCK_DIR, { recursive: true, force: true });
  }
}

/** Compiles what changed and links; `objectsOnly` stops before linking (the CI compile gate). */
export function buildLib(kind: LibKind, opts: { log?: (s: string) => void; objectsOnly?: boolean } = {}): Promise<BuildResult> {
  return withBuildLock(() => buildLibUnlocked(kind, opts));
}

async function buildLibUnlocked(kind: LibKind, opts: { log?: (s: string) => void; objectsOnly?: boolean }): Promise<BuildResult> {
  const log = opts.log ?? (() => {});
  // the wrappers and the header are generated from the rule declarations (ffi/generate.ts)
  const written = writeGenerated();
  if (written.length > 0) log(`nlk build: regenerated ${written.join(", ")}`);
  const compiler = requireTools(kind);
  const { tc, objDir } = toolchainFor(kind);
  mkdirSync(objDir, { recursive: true });
  const env = hashOf(compiler, toolVersion(compiler), headersHash(), ...tc.compile("x.cu"));
  const sources = sourcesOf(kind);
  const jobs: { src: string; obj: string; key: string }[] = [];
  const objs: string[] = [];
  for (const src of sources) {
    const obj = join(objDir, `${basename(src)}.o`);
    objs.push(obj);
    const key = hashOf(env, src, readFileSync(src, "utf8"));
    if (!existsSync(obj) || readKey(`${obj}.key`) !== key) jobs.push({ src, obj, key });
  }
  if (jobs.length > 0) log(`nlk build ${kind}: compiling ${jobs.length} of ${sources.length} sources with ${tc.compiler}`);
  let compiled = 0;
  const t0 = performance.now();
  await parallel(jobs, Math.max(1, availableParallelism()), async ({ src, obj, key }) => {
    const tmp = `${obj}.${process.pid}.tmp`;
    await run([compiler, ...tc.compile(src), "-c", src, "-o", tmp], `compiling ${basename(src)} (${kind})`);
    log(`nlk build ${kind}: [${++compiled}/${jobs.length}] ${basename(src)} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    renameSync(tmp, obj);
    writeFileSync(`${obj}.key`, key);
  });
  const out = libPath(kind);
  if (opts.objectsOnly) return { path: out, compiled: jobs.length, linked: false };
  const linkKey = hashOf(...objs.map((o) => readKey(`${o}.key`) ?? ""), ...tc.link([], ""));
  if (jobs.length === 0 && existsSync(out) && readKey(`${out}.key`) === linkKey) return { path: out, compiled: 0, linked: false };
  const tmp = `${out}.${process.pid}.tmp`;
  const cmd = tc.link(objs, tmp);
  if (cmd[0] === "nvcc") cmd[0] = compiler;
  await run(cmd, `linking ${basename(out)}`);
  renameSync(tmp, out);
  writeFileSync(`${out}.key`, linkKey);
  log(`nlk build ${kind}: ${out}`);
  return { path: out, compiled: jobs.length, linked: true };
}

async function main(argv: string[]): Promise<number> {
  const log = (s: string) => console.error(s);
  try {
    if (argv.includes("--check-cuda")) {
      // both storage precisions: the bf16 wrappers (cuda/storage.cuh) are compiled only in the bf16 build
      for (const kind of ["cuda", "cuda-bf16"] as const) {
        const r = await buildLib(kind, { log, objectsOnly: true });
        console.log(`${kind} compile gate: every kernel source compiles for sm_90 (${sourcesOf(kind).length} sources, ${r.compiled} recompiled)`);
      }
      return 0;
    }
    const kinds = argv.filter((a) => !a.startsWith("-"));
    const wanted = kinds.includes("all") ? LIB_KINDS : kinds.length > 0 ? kinds : ["cpu"];
    for (const k of wanted) {
      if (!LIB_KINDS.includes(k as LibKind)) {
        console.error(`unknown library kind '${k}' (expected ${LIB_KINDS.join(", ")} or all)`);
        return 2;
      }
      const r = await buildLib(k as LibKind, { log });
      console.log(`${k}: ${r.path}${r.compiled === 0 && !r.linked ? " (up to date)" : ""}`);
    }
    return 0;
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    return 1;
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
