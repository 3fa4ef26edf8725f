/**
 * C7 — CMS semantics over the build loop (docs/spec/conformance.md#c7): the pulse schedule, error
 * buffers (D13), the tape and hand-written trajectories, and a training smoke check.
 */
import { cmsStep } from "../../oracle/cms-backward.ts";
import { bitwiseEqual, emptyWorst, type Worst } from "../../oracle/compare.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import { runBuild, type BuildStepRecord } from "../../src/model/build.ts";
import { Conductor } from "../../src/model/conductor.ts";
import { cloneParams, sgdInPlace } from "../../src/model/params.ts";
import { modelForward } from "../../src/model/forward.ts";
import { tapeStep, type Stepper } from "../../src/model/step.ts";
import { maxAbs } from "../../src/numeric.ts";
import { Tensor, clone } from "../../src/tensor.ts";
import { buildModelCase, chunkSizesFor, type ModelCaseSpec } from "../../cases/model-case.ts";

/** The outer learning rate of every C7 loop. */
export const LR = 0.01;
/** C7: the build-loop trajectories after step 0 (ULP-level parameter differences grow a little). */
export const TRAJECTORY_RTOL = 1e-12;

/** Pulse schedule over 600 steps: level l active iff n % C_l == 0, observe-then-advance. */
export function pulseSchedule(k: number): CaseOutcome {
  const chunks = chunkSizesFor(k);
  const conductor = new Conductor(chunks);
  const fired = chunks.map(() => [] as number[]);
  for (let n = 0; n < 600; n++) {
    const p = conductor.pulse();
    const again = conductor.pulse();
    if (p.step !== n || again.step !== n || p.active.join() !== again.active.join()) {
      return { ok: false, message: `step ${n}: reading the pulse changed it (step ${p.step} then ${again.step})` };
    }
    for (let l = 0; l < k; l++) {
      if (p.active[l] !== (n % chunks[l]! === 0)) return { ok: false, message: `step ${n} level ${l}: active = ${p.active[l]}, C = ${chunks[l]}` };
      if (p.active[l]) fired[l]!.push(n);
    }
    conductor.advance();
  }
  for (let l = 0; l < k; l++) {
    const want = Math.ceil(600 / chunks[l]!);
    if (fired[l]!.length !== want) return { ok: false, message: `level ${l} fired ${fired[l]!.length} times in 600 steps, expected ${want}` };
  }
  // The sheet's examples (§9.1): k=2 level 1 at 0, 8, 16, ...; k=4 level 3 at 0 and 512.
  if (k === 2 && fired[1]!.slice(0, 3).join() !== "0,8,16") return { ok: false, message: `k=2 level 1 fired at ${fired[1]!.slice(0, 3)}` };
  if (k === 4 && fired[3]!.join() !== "0,512") return { ok: false, message: `k=4 level 3 fired at ${fired[3]}` };
  return { ok: true };
}

/**
 * Error buffers over a build loop (D13): while a level is frozen its step gradient is zero, its
 * parameters do not move and its buffer is the running sum of its W_Q gradients; at its next
 * active step the step's own gradient is applied, then the buffer, then the buffer is empty.
 */
export function errorBufferCase(spec: ModelCaseSpec, steps: number, stepper: Stepper): CaseOutcome {
  const c = buildModelCase(spec);
  const params = cloneParams(c.params);
  const k = c.model.k;
  const running: (Record<string, Tensor> | null)[] = Array.from({ length: k }, () => null);
  let before = cloneParams(params);
  let applications = 0, accumulated = 0;
  let failure: string | null = null;
  let worstBuf = 0;
  const onStep = (rec: BuildStepRecord) => {
    if (failure !== null) return;
    const r = rec.result;
    for (let l = 0; l < k && failure === null; l++) {
      const expectActive = rec.step % c.model.spec.chunk_sizes[l]! === 0;
      if (r.active[l] !== expectActive) failure = `step ${rec.step} level ${l}: active = ${r.active[l]}, expected ${expectActive}`;
      else if (!r.active[l]) {
        accumulated++;
        const g = r.buffers[l]!.W_Q;
        if (g === undefined) failure = `step ${rec.step} level ${l}: frozen, but no W_Q gradient for the buffer`;
        else {
          worstBuf = Math.max(worstBuf, maxAbs(g.data));
          const sum = running[l] ?? { W_Q: new Tensor(g.dtype, g.shape) };
          for (let i = 0; i < g.size; i++) sum.W_Q!.data[i] = sum.W_Q!.data[i]! + g.data[i]!;
          running[l] = sum;
          const buf = rec.buffers.content(l).W_Q;
          if (buf === undefined || bitwiseEqual(buf.data, sum.W_Q!.data) !== -1) failure = `step ${rec.step} level ${l}: the buffer is not the sum of the frozen steps' W_Q gradients`;
          // Frozen steps since the level was last active.
          else if (rec.buffers.steps(l) !== rec.step % c.model.spec.chunk_sizes[l]!) failure = `step ${rec.step} level ${l}: ${rec.buffers.steps(l)} steps accumulated`;
          for (const [n, t] of Object.entries(rec.params.levels[l]!)) {
            if (failure === null && bitwiseEqual(t.data, before.levels[l]![n]!.data) !== -1) failure = `step ${rec.step} level ${l}: frozen parameter ${n} moved`;
          }
        }
      } else {
        // Expected: p − lr·g (the step), then − lr·buffer when one was pending.
        const pending = running[l] ?? null;
        const want: Record<string, Tensor> = {};
        for (const [n, t] of Object.entries(before.levels[l]!)) {
          const w = clone(t);
          sgdInPlace(w, r.grads.levels[l]![n]!, LR);
          if (pending !== null && pending[n] !== undefined) sgdInPlace(w, pending[n]!, LR);
          want[n] = w;
        }
        for (const [n, w] of Object.entries(want)) {
          if (failure === null && bitwiseEqual(rec.params.levels[l]![n]!.data, w.data) !== -1) {
            failure = `step ${rec.step} level ${l}: ${n} is not p − lr·grad${pending !== null ? " − lr·buffer" : ""}`;
          }
        }
        if (pending !== null) {
          applications++;
          if (!rec.applied.includes(l)) failure = `step ${rec.step} level ${l}: a pending buffer was not applied`;
          if (rec.buffers.steps(l) !== 0 || Object.keys(rec.buffers.content(l)).length !== 0) failure = `step ${rec.step} level ${l}: buffer not reset after applying`;
          running[l] = null;
        }
      }
    }
    before = cloneParams(rec.params);
  };
  runBuild(c.model, params, c.batch, c.context, { steps, lr: LR, stepper, onStep });
  if (failure !== null) return { ok: false, message: failure };
  if (applications === 0 || accumulated === 0) return { ok: false, vacuous: true, message: `no buffer was filled and applied in ${steps} steps` };
  if (worstBuf === 0) return { ok: false, vacuous: true, message: "every buffered W_Q gradient was zero" };
  return { ok: true, message: `${accumulated} frozen level-steps buffered, ${applications} buffers applied` };
}

/** The same 10-step loop on the tape path and the hand-written path: losses bitwise at step 0, then within TRAJECTORY_RTOL. */
export function trajectoryCase(spec: ModelCaseSpec, steps: number): CaseOutcome {
  const c = buildModelCase(spec);
  const run = (stepper: Stepper) => {
    const actives: string[] = [];
    const r = runBuild(c.model, cloneParams(c.params), c.batch, c.context, {
      steps, lr: LR, stepper, onStep: (rec) => actives.push(rec.result.active.map(Number).join("")),
    });
    return { losses: r.losses, actives };
  };
  const tape = run(tapeStep), hand = run(cmsStep);
  if (bitwiseEqual([tape.losses[0]!], [hand.losses[0]!]) !== -1) return { ok: false, message: `step 0: tape ${tape.losses[0]}, hand-written ${hand.losses[0]}` };
  let worst: Worst = emptyWorst();
  for (let n = 0; n < steps; n++) {
    if (tape.actives[n] !== hand.actives[n]) return { ok: false, message: `step ${n}: active levels ${tape.actives[n]} vs ${hand.actives[n]}` };
    const a = tape.losses[n]!, b = hand.losses[n]!;
    const abs = Math.abs(a - b), rel = abs / Math.abs(b);
    if (abs > worst.abs) worst = { abs, rel, tensor: "loss", index: n };
    if (!(rel <= TRAJECTORY_RTOL)) return { ok: false, worst, message: `step ${n}: tape loss ${a}, hand-written ${b} (relative ${rel.toExponential(3)})` };
  }
  if (new Set(tape.losses).size < 2) return { ok: false, vacuous: true, worst, message: "the loss never changed: the loop did not train" };
  return { ok: true, worst };
}

/**
 * Smoke check of the whole pipeline: 50 tape-path steps at lr 0.01 from the D4 init, and the
 * trained parameters give the first step (same batch, same initial context) a lower loss. The
 * loss is compared at the initial context because the loop's own losses also move with the
 * context memories it writes: under MAC the first write can raise the next step's loss by more
 * than 50 steps of SGD lower it (measured: lattice, 2.398 -> 2.429 at step 5, then falling).
 */
export function lossDecreases(spec: ModelCaseSpec): CaseOutcome {
  const c = buildModelCase(spec);
  const trained = cloneParams(c.params);
  const { losses } = runBuild(c.model, trained, c.batch, c.context, { steps: 50, lr: LR, stepper: tapeStep });
  if (!losses.every(Number.isFinite)) return { ok: false, message: `a loss was not finite: ${losses.find((x) => !Number.isFinite(x))}` };
  const first = losses[0]!;
  const pulse = c.model.levels.map(() => true);
  const after = modelForward(c.model, trained, c.batch, pulse, c.context).loss.data[0]!;
  if (!(after < first)) return { ok: false, message: `the first step's loss went from ${first} to ${after} after 50 steps` };
  return { ok: true, message: `first step's loss ${first.toFixed(6)} -> ${after.toFixed(6)}; loop loss ${first.toFixed(6)} -> ${losses[losses.length - 1]!.toFixed(6)}` };
}
