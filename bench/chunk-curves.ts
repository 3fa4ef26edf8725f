/**
 * The chunk-start GD curve per rule that has the form (docs/spec/chunk-forms.md#chunk-start-gd-curve):
 * mean over a fixed batch of cases of the RMS distance of y to the sequential rule, for
 * C = 1, 2, 4, 8, 16, at θ small and θ large (Lattice: α low and high, its write scale); and the worst relative distance of the exact
 * chunked form for C = 1, 2, 4, 8, 16, 64. Accuracy only, no timing. Usage: npx bun bench/chunk-curves.ts
 */
import { buildChunkCase, type ChunkCaseSpec } from "../cases/chunk-case.ts";
import { gdCurve } from "../conformance/chunk-api.ts";
import { maxAbs } from "../src/numeric.ts";
import { exactChunked } from "../src/rules/chunk-matrix.ts";
import { hasChunkStartGd } from "../src/rules/chunk-gd.ts";
import { RULES } from "../src/rules/index.ts";

const N = 24;
function batch(theta: "small" | "large"): ChunkCaseSpec[] {
  return Array.from({ length: N }, (_, i) => ({
    d: 2 + (i % 7), hyper: {}, seq_len: 17 + ((i * 7) % 24), alpha: (["low", "mid", "high"] as const)[i % 3]!, theta,
    state: i % 2 === 0 ? "init" : "random", seed: 1000 + i,
  }));
}

console.log("| rule | θ | C=1 | C=2 | C=4 | C=8 | C=16 |");
console.log("|---|---|---:|---:|---:|---:|---:|");
const row = (decl: (typeof RULES)[number], label: string, specs: ChunkCaseSpec[]): void =>
  console.log(`| ${decl.key} | ${label} | ${gdCurve(decl, specs).map((x) => x.toExponential(2)).join(" | ")} |`);
for (const decl of RULES.filter(hasChunkStartGd)) {
  if (decl.key === "trellis") {
    // its default d_compress = 4 exceeds the batch's smallest d = 2
    for (const theta of ["small", "large"] as const) row(decl, theta, batch(theta).map((s) => ({ ...s, hyper: { d_compress: 2 } })));
    continue;
  }
  if (decl.key === "lattice") {
    // Lattice's write scale is α (θ is unused): its rows fix α instead.
    for (const alpha of ["low", "high"] as const) row(decl, `α ${alpha}`, batch("small").map((s) => ({ ...s, alpha })));
    continue;
  }
  for (const theta of ["small", "large"] as const) row(decl, theta, batch(theta));
}
console.log("\n| rule | exact chunked, worst max|Δ|/max|y_seq| over the batch: C=1 | 2 | 4 | 8 | 16 | 64 |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const decl of RULES.filter((r) => r.matrixChunk !== undefined)) {
  const worst = [1, 2, 4, 8, 16, 64].map((C) => {
    let w = 0;
    for (const spec of [...batch("small"), ...batch("large")].map((s) => ({ ...s, seq_len: s.seq_len + 40 }))) {
      const c = buildChunkCase(decl, spec);
      const ref = decl.inner.forward(c.inp, c.state, { d: spec.d, seq_len: spec.seq_len });
      const r = exactChunked(decl, c.inp, c.state, C);
      let m = 0;
      for (let i = 0; i < r.y.size; i++) m = Math.max(m, Math.abs(r.y.data[i]! - ref.y.data[i]!));
      w = Math.max(w, m / maxAbs(ref.y.data));
    }
    return w.toExponential(1);
  });
  console.log(`| ${decl.key} | ${worst.join(" | ")} |`);
}
