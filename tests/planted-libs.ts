/**
 * The planted native libraries of the lib: tests: one C++ source (tests/libs/) built once per plant,
 * with -DPLANT_<PLANT> (none for the clean build), into build/test-libs/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

/** Builds tests/libs/<source> for every plant into libOf(plant); `clean` is the plant built without a define. */
export function buildPlantedLibs<P extends string>(source: string, plants: readonly P[], clean: P, libOf: (p: P) => string): void {
  mkdirSync(join(ROOT, "build", "test-libs"), { recursive: true });
  for (const p of plants) {
    const cc = Bun.spawnSync({
      cmd: ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-I", join(ROOT, "ffi"), ...(p === clean ? [] : [`-DPLANT_${p.toUpperCase()}`]),
        "-o", libOf(p), join(ROOT, "tests", "libs", source)],
      stdout: "pipe", stderr: "pipe",
    });
    if (cc.exitCode !== 0) throw new Error(`building ${libOf(p)} failed: ${cc.stderr.toString()}`);
  }
}
