/**
 * The report records the toolchain of every available kernel backend
 * (docs/spec/conformance.md#toolchain): a native library's file hash and compiler, a py: kernel's
 * torch, Python and module hash; the report schema accepts it (the run validates before writing).
 */
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import type { BackendInfo } from "../ffi/backends.ts";

const LIB = join(ROOT, "build", "test-libs", "libhazard_none.so");
const PY = "examples/py-kernels/naive_delta.py";
const hasTorch = probeTorchSync().available;
const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex").slice(0, 16);

test("a native library's and a py: kernel's toolchain are in the report", () => {
  mkdirSync(join(ROOT, "build", "test-libs"), { recursive: true });
  const cc = Bun.spawnSync({ cmd: ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-I", join(ROOT, "ffi"), "-o", LIB, join(ROOT, "tests", "libs", "hazards-delta.cpp")] });
  expect(cc.exitCode).toBe(0);
  const dir = mkdtempSync(join(tmpdir(), "nlc-toolchain-"));
  try {
    const report = join(dir, "r.json");
    const filters = [`C5/lib-libhazard_none/delta/forward`, ...(hasTorch ? ["C5/py-naive_delta/delta/forward"] : [])];
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", "--backend", `lib:${LIB}`, ...(hasTorch ? ["--backend", `py:${PY}:naive_delta`] : []),
        "--filter", filters.join(","), "--profile", "quick", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(0);
    const backends = (JSON.parse(readFileSync(report, "utf8")) as { run: { backends: BackendInfo[] } }).run.backends;
    const lib = backends.find((b) => b.name === `lib:${LIB}`)!;
    expect(lib.toolchain?.sha256).toBe(sha(LIB));
    expect(lib.toolchain?.file).toBe(LIB);
    expect(lib.toolchain?.compiler ?? "readelf missing").toMatch(/GCC|readelf missing/);
    if (hasTorch) {
      const py = backends.find((b) => b.name === `py:${PY}:naive_delta`)!;
      expect(py.toolchain?.torch).toMatch(/^\d+\.\d+/);
      expect(py.toolchain?.python).toMatch(/^3\./);
      expect(py.toolchain?.sha256).toBe(sha(join(ROOT, PY)));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
