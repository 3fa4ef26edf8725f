/** The chunk arithmetic shared by the chunk-start GD forms (docs/spec/chunk-forms.md#chunk-start-gd). */

/** Throws unless the chunk size C is an integer >= 1. */
export function checkChunkSize(C: number): void {
  if (!Number.isInteger(C) || C < 1) throw new Error(`chunk size C = ${C}: expected an integer >= 1`);
}

/** First token of the chunk of C tokens holding token t. */
export const chunkStart = (t: number, C: number): number => t - (t % C);
