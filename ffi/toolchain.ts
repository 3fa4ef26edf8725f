/**
 * The toolchain a kernel ran with, as the report records it per backend
 * (docs/spec/conformance.md#toolchain): what built and runs the kernel, and a hash of the file it
 * came from, so two reports can be told apart by more than their numbers. Fields that do not apply
 * or cannot be found are absent; a `py:` kernel's come from its host (python/nlc_torch/kernel_host.py).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";

export interface Toolchain {
  /** The library or module file the kernel was loaded from, and the first 16 hex digits of its SHA-256. */
  file?: string;
  sha256?: string;
  /** The compiler that built it (a library's .comment section; torch's own build compiler for a py: kernel). */
  compiler?: string;
  /** CUDA: the toolkit a build of ours was compiled with, or the one torch was built for. */
  cuda?: string;
  /** The NVIDIA driver, where one is loaded (/proc/driver/nvidia/version). */
  driver?: string;
  gpu?: string;
  torch?: string;
  triton?: string;
  python?: string;
}

/** The first 16 hex digits of a file's SHA-256, or undefined when it cannot be read. */
export function fileSha256(path: string): string | undefined {
  try {
    return createHash("sha256").update(readFileSync(path)).digest("hex").slice(0, 16);
  } catch {
    return undefined;
  }
}

/** The loaded NVIDIA kernel driver's version, if any. */
export function nvidiaDriver(): string | undefined {
  const f = "/proc/driver/nvidia/version";
  if (!existsSync(f)) return undefined;
  const m = /Kernel Module\s+(?:for \S+\s+)?([\d.]+)/.exec(readFileSync(f, "utf8"));
  return m?.[1];
}

/** The compilers a shared library's .comment section names (GCC, clang), joined; undefined without readelf or a comment. */
export function libraryCompiler(path: string): string | undefined {
  try {
    const p = Bun.spawnSync({ cmd: ["readelf", "-p", ".comment", path], stdout: "pipe", stderr: "pipe" });
    if (p.exitCode !== 0) return undefined;
    const names = [...p.stdout.toString().matchAll(/\]\s+(.+)$/gm)].map((m) => m[1]!.trim()).filter((s) => /gcc|clang|nvcc|cuda/i.test(s));
    return names.length > 0 ? [...new Set(names)].join("; ") : undefined;
  } catch {
    return undefined;
  }
}

/** The CUDA toolkit release nvcc reports ("13.0"), or undefined. */
export function nvccRelease(): string | undefined {
  try {
    const nvcc = Bun.which("nvcc") ?? (existsSync("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : null);
    if (nvcc === null) return undefined;
    const p = Bun.spawnSync({ cmd: [nvcc, "--version"], stdout: "pipe", stderr: "pipe" });
    return p.exitCode === 0 ? /release ([\d.]+)/.exec(p.stdout.toString())?.[1] : undefined;
  } catch {
    return undefined;
  }
}

/** A native library's toolchain: its file and hash, compiler, GPU and driver; `cudaBuild`: the CUDA toolkit too. */
export function libToolchain(path: string, gpu: string | undefined, cudaBuild: boolean): Toolchain {
  const t: Toolchain = { file: path };
  const put = <K extends keyof Toolchain>(k: K, v: Toolchain[K] | undefined) => {
    if (v !== undefined && v !== "") t[k] = v;
  };
  put("sha256", fileSha256(path));
  put("compiler", libraryCompiler(path));
  if (cudaBuild) put("cuda", nvccRelease());
  put("driver", nvidiaDriver());
  put("gpu", gpu);
  return t;
}
