/** What a loaded kernel library offers (ffi/nlk.h, docs/spec/kernel-abi.md): its errors, device, rule pairs and frozen kernels. */
import type { RuleConfig } from "../src/rules/types.ts";
import type { RuleAbi, Shape } from "./abi.ts";
import type { StorageDType } from "../src/precision.ts";
import { hazardMessage, type Hazard, type HazardPlan } from "./hazards.ts";

/** A kernel returned a non-zero status. */
export class KernelError extends Error {
  constructor(readonly symbol: string, readonly status: number, detail: string) {
    super(`${symbol} returned status ${status} (${detail})`);
  }
}

/** A kernel call read past an input's end, wrote into an input or past a buffer's end, or two runs differed (docs/spec/hazards.md). */
export class HazardError extends Error {
  constructor(readonly symbol: string, readonly hazards: readonly Hazard[]) {
    super(hazards.map((h) => hazardMessage(h, symbol)).join("; "));
  }
}

/** Thrown when a library cannot be used at all (missing identity symbols, wrong ABI version). */
export class LibraryError extends Error {}

export type Fn = (...args: unknown[]) => number;

/** A library's memory: allocation, copies (converting to and from the wire dtype), NaN fill. */
export interface LibMemory {
  alloc(bytes: number): number;
  free(p: number | null): void;
  upload(data: Float32Array, dtype?: StorageDType): number;
  download(p: number, n: number, dtype?: StorageDType): Float32Array;
  nanBuffer(n: number, dtype?: StorageDType): number;
}

export interface Device {
  status: number;
  name: string;
}

export type Arrays = Record<string, Float32Array>;

export interface EmuControls {
  setOrder(reversed: boolean): void;
  setMode(threads: boolean): void;
  /** Blocks sized as in the cuda build (whole warps) instead of the emulation's few threads. */
  setGpuBlocks(on: boolean): void;
  errorDetail(): string;
}

/** The forward's workspace, in library memory until freed. */
export interface Workspace {
  readonly ptr: number | null;
  readonly bytes: number;
  free(): void;
}

/** A pair's declared chunk form: the reference it is compared with (chunk size C where it has one). */
export interface ChunkForm {
  kind: "sequential" | "exact-chunked" | "chunk-start-gd";
  C: number;
}

export interface DTypes {
  storage: string;
  state: string;
  accumulate: string;
}

/** Pointers (library memory) by parameter name; dy and d<state> may be null. */
export type Pointers = Record<string, number | null>;

export interface RulePair {
  readonly abi: RuleAbi;
  /** One call on library memory that is already in place (the benchmark): no copies, no fills. */
  callRaw(fn: "forward" | "backward", shape: Shape, C: number, cfg: RuleConfig, ptrs: Pointers): void;
  workspaceBytes(shape: Shape, C: number, cfg: RuleConfig): number;
  forward(shape: Shape, C: number, cfg: RuleConfig, inputs: Arrays, state0: Arrays): { y: Float32Array; state: Arrays; ws: Workspace };
  /** dy and dFinal null = zero. Returns the input gradients (by grad name) and d(initial state) (by state name). */
  backward(shape: Shape, C: number, cfg: RuleConfig, inputs: Arrays, state0: Arrays, ws: Workspace, dy: Float32Array | null,
    dFinal: Arrays | null): { grads: Arrays; dState0: Arrays };
}

export interface FrozenKernel {
  readonly abi: RuleAbi;
  callRaw(fn: "frozen_forward" | "frozen_backward", shape: Shape, cfg: RuleConfig, ptrs: Pointers): void;
  workspaceBytes(shape: Shape, cfg: RuleConfig): number;
  forward(shape: Shape, cfg: RuleConfig, q: Float32Array, state: Arrays): { y: Float32Array; ws: Workspace };
  backward(shape: Shape, cfg: RuleConfig, q: Float32Array, state: Arrays, ws: Workspace, dy: Float32Array | null): { dq: Float32Array; dState: Arrays };
}

/** The variants a pair can run in, and the pin (docs/spec/kernel-abi.md#variants). */
export interface PairVariants {
  /** Variant i's name, as nlk_<rule>_variants names it (the index where it names none). */
  readonly names: readonly string[];
  /** Pins variant `index` for later calls; -1: the library's own choice. Throws naming the symbol when the library refuses. */
  pin(index: number): void;
}

export interface KernelLib {
  readonly path: string;
  readonly backend: string;
  device(): Device;
  peakGbps(): number;
  lastKernelMs(): number;
  statusString(status: number): string;
  /** The rule's pair, or why it is missing ("not implemented by <lib>: ..."). */
  pair(rule: string): RulePair | string;
  frozen(rule: string): FrozenKernel | string;
  dtypes(symbol: string): DTypes | string;
  /**
   * The chunk form the rule's pair declares (docs/spec/kernel-abi.md#chunk-form): sequential when
   * the library does not export nlk_<rule>_chunk_form; a string when the query fails or answers
   * something undefined.
   */
  chunkForm(rule: string): ChunkForm | string;
  /**
   * The variants of the rule's pair (docs/spec/kernel-abi.md#variants): null when the library
   * exports neither nlk_<rule>_variants nor nlk_<rule>_set_variant (judged under its own dispatch
   * only); a string when it exports one without the other, or its list cannot be read.
   */
  variants(rule: string): PairVariants | null | string;
  /** Library memory (nlk_alloc and the copies). */
  readonly memory: LibMemory;
  /** Called with the symbol before every kernel call (the C5 child reports it, so a crash names its kernel). */
  onCall: ((symbol: string) => void) | null;
  /** The hazard probes around every kernel call (docs/spec/hazards.md); HAZARD_PLAN unless a caller changes it. */
  hazards: HazardPlan;
  /**
   * The relative tolerance within which two runs of `symbol` may differ, as the library declares it
   * (optional nlk_nondeterminism); null: they must agree bitwise.
   */
  nondeterminism(symbol: string): number | null;
  readonly emu: EmuControls | null;
  /** The no-op call used to measure the ffi overhead. */
  readonly abiVersion: () => number;
  /** Raw symbols of a test library (cpu-test build), when present. */
  readonly raw: Record<string, Fn>;
}
