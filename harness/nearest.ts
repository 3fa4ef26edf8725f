/**
 * The nearest known name to a misspelt one, for messages that name an unknown key or rule
 * ("unknown key 'chunksize'; did you mean 'chunk_size'?"): the known name at the smallest edit
 * distance (insertions, deletions, substitutions, adjacent swaps; case and '-'/'_' ignored), if that
 * distance is at most a third of the longer name (at least 2); else null.
 */

function normal(s: string): string {
  return s.toLowerCase().replace(/[-_]/g, "");
}

/** Optimal string alignment distance (Damerau–Levenshtein without repeated edits of a substring). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

export function nearest(word: string, known: readonly string[]): string | null {
  const w = normal(word);
  let best: string | null = null, bestD = Infinity;
  for (const k of known) {
    const n = normal(k);
    // one name contained in the other (gated-delta in gated_delta_rule) counts as near
    const d = n === w ? 0 : n.includes(w) || w.includes(n) ? Math.abs(n.length - w.length) / 4 : editDistance(w, n);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best !== null && bestD <= Math.max(2, Math.floor(Math.max(w.length, normal(best).length) / 3)) ? best : null;
}

/** "; did you mean 'x'?" when a nearest known name exists, else the list of known names. */
export function suggestion(word: string, known: readonly string[]): string {
  const n = nearest(word, known);
  return n !== null ? `; did you mean '${n}'?` : ` (known: ${known.join(", ")})`;
}
