/**
 * One sequence of a kernel case, as every kernel path holds it: what goes in (PairCase: the
 * inputs, the initial state, dy and d(final state) of one sequence) and what comes out
 * (SeqTensors: y, the final state, every input gradient and d(initial state)), by what each
 * tensor is rather than by a name in a string. A kernel, ref64 and the plain reference all give a
 * SeqTensors; cases/kernel-layout.ts packs and unpacks them, cases/kernel-tensors.ts names them.
 */
import type { InnerInputs, State } from "../src/rules/types.ts";
import type { Tensor } from "../src/tensor.ts";

/** What one sequence of a kernel case gives (a kernel, ref64 or the plain reference). */
export interface SeqTensors<A = ArrayLike<number>> {
  y?: A;
  /** Final state by state name (active pairs). */
  state: Record<string, A>;
  /** Input gradients by input name: dk is grads.k. */
  grads: Record<string, A>;
  /** d(initial state) by state name (a frozen read: d(read state)). */
  dState0: Record<string, A>;
}

/** The inputs of one sequence of a kernel case (already rounded to the kernel's storage dtype where they cross the ABI). */
export interface PairCase {
  readonly inputs: InnerInputs;
  readonly state: State;
  readonly dy: Tensor;
  /** The final state's upstream gradient (active pairs; absent = zero). */
  readonly dFinal?: State;
}
