/**
 * The kernel backend contract (docs/spec/kernel-abi.md#kernel-backends): what every kind of kernel
 * backend gives the kernel checks, whatever runs its kernels — a native library through ffi/nlk.h
 * (`lib:`, cpu-emu and the other builds of our .cu sources; conformance/kernel/native/backend.ts) or a
 * PyTorch/Triton pair behind a Python process (`py:`; conformance/kernel/python/backend.ts).
 *
 *   probe()                  available (with the device and toolchain), or the reason it is not
 *   declare(rule, frozen)    what it declares for one rule variant: whether it is judged, the
 *                            precision per phase, chunk sizes, varlen, forward-only
 *   forward(batch)           y and (active) the final state, per sequence n = b·H + h
 *   backward(batch)          every input gradient and d(initial state), per sequence, given the
 *                            batch's dy and d(final state) (either may be NULL: zero)
 *   close()                  releases what it holds (processes, library memory)
 *
 * Outputs come back as the one typed per-sequence record (oracle/kernel-case.ts SeqTensors),
 * together with what the hazard probes saw (docs/spec/hazards.md): a check judges the same record
 * whichever backend made it. Isolation (a child process per backend, a fresh one after a crash,
 * per-request timeouts) belongs to the backend's kind, not to the checks.
 *
 * A native library answers at once (its calls run in the checking process, itself a child of the
 * suite); a Python process answers later: `Answer` is the value or its promise, by kind.
 */
import type { ChunkForm } from "../ffi/lib-types.ts";
import type { Hazard } from "../ffi/hazards.ts";
import type { Toolchain } from "../ffi/toolchain.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import type { Precision } from "../src/precision.ts";

/** How a backend's kernels are reached: a native library, a Python process, or TypeScript in the checking process. */
export type BackendKind = "native" | "python" | "in-process";

/**
 * What a kernel check needs of a backend beyond the contract's forward and backward, and what a
 * backend offers (docs/spec/kernel-abi.md#kernel-backends): `contract` — forward and backward
 * (every backend); `library` — a native library's own entry points (its workspace size query, the
 * pair called chunk by chunk, the pair inside the tape); `emulation` — the CPU emulation's controls
 * (thread order, GPU-sized blocks; cpu-emu); `refusal` — a kernel host that sends a call the kernel
 * cannot compute, which it must refuse (the `py:` contract check, docs/spec/py-backend.md#contracts).
 * A check is generated for a backend only where the backend offers what it needs
 * (conformance/kernel/plan.ts).
 */
export type Capability = "contract" | "library" | "emulation" | "refusal";

/** Whether a backend can run kernels: its device (and toolchain), or why not. */
export type Probe =
  | { readonly available: true; readonly device: string; readonly toolchain?: Toolchain }
  /** broken: the backend should work and does not (an `error`); else a legitimate skip (no GPU, no compiler). */
  | { readonly available: false; readonly reason: string; readonly broken: boolean };

/** What a backend declares for one rule variant. */
export interface KernelDeclaration {
  /** Why its kernels are not judged (not implemented, a precision with no rule), or null. */
  readonly skip: string | null;
  /** The skip is that it does not implement the rule variant at all (no check of the run: docs/spec/conformance.md#undeclared). */
  readonly undeclared?: boolean;
  /** The precision each phase's kernel declares (docs/spec/precision.md#declaration). */
  readonly precision: Readonly<Record<"forward" | "backward", Precision>>;
  /** The chunk sizes it declares (the cases' boundaries are set by them), or null: the defaults. */
  readonly chunkSizes: readonly number[] | null;
  /** The function its pair computes (docs/spec/kernel-abi.md#chunk-form), or why the declaration is unreadable. */
  readonly chunkForm: ChunkForm | string;
  /** It takes packed variable-length batches (docs/spec/py-backend.md#packed). */
  readonly varlen: boolean;
  /** It has no backward: its backward checks are skipped with that reason. */
  readonly forwardOnly: boolean;
}

/** One kernel call's answer: per sequence n = b·H + h, the phase's tensors; and what the hazard probes found. */
export interface KernelRun {
  readonly perSeq: readonly SeqTensors[];
  readonly hazards: readonly Hazard[];
  /** The kernel as a hazard message names it. */
  readonly who: string;
  /** The largest relative difference between two runs (a kernel that declares a tolerance). */
  readonly rerunMaxRel?: number;
  /** The runs of the call the backend made (the judged one, the hazard probes'), where it counts them. */
  readonly runs?: number;
}

export type Answer<Sync extends boolean, T> = Sync extends true ? T : Promise<T>;

/**
 * A kernel backend. `Batch` is the case as the backend's kind receives it (a native library the
 * packed f32 ABI batch, a Python process the canonical-layout request); `Sync` whether it answers
 * at once.
 */
export interface KernelBackend<Batch, Sync extends boolean> {
  /** As --backend names it: `cpu-emu`, `lib:<path>`, `py:<module>:<callable>`. */
  readonly name: string;
  readonly kind: BackendKind;
  probe(): Probe;
  declare(rule: string, frozen: boolean): KernelDeclaration;
  forward(batch: Batch): Answer<Sync, KernelRun>;
  backward(batch: Batch): Answer<Sync, KernelRun>;
  close(): Answer<Sync, void>;
}
