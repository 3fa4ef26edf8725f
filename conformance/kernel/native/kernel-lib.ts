/** What the child's checks need from a loaded kernel library, or an error saying what is missing. */
import type { EmuControls, FrozenKernel, KernelLib, RulePair } from "../../../ffi/lib-types.ts";

/** The rule's kernel pair; a missing one is an error of the case (the checks test for it up front). */
export function requirePair(lib: KernelLib, rule: string): RulePair {
  const p = lib.pair(rule);
  if (typeof p === "string") throw new Error(p);
  return p;
}

/** The emulation controls (the cpu-emu build only). */
export function requireEmu(lib: KernelLib): EmuControls {
  if (lib.emu === null) throw new Error(`${lib.path} has no emulation controls (not a cpu-emu build)`);
  return lib.emu;
}

/** A test-only symbol of the cpu-test build. */
export function requireTestSymbol(lib: KernelLib, name: string): KernelLib["raw"][string] {
  const fn: KernelLib["raw"][string] | undefined = lib.raw[name];
  if (fn === undefined) throw new Error(`${lib.path} does not export the test kernel ${name}`);
  return fn;
}

/** The rule's frozen-read kernels. */
export function requireFrozen(lib: KernelLib, rule: string): FrozenKernel {
  const p = lib.frozen(rule);
  if (typeof p === "string") throw new Error(p);
  return p;
}
