/**
 * The chunk-form checks' public API, for code outside the suite's checks (bench/chunk-curves.ts):
 * the measured chunk-size curve of a Gated Delta chunk form (docs/spec/chunk-forms.md). bench/ and
 * fixtures/ import it from here, never from the check folder (tests/layering.test.ts).
 */
export { gdCurve } from "./chunk/forms.ts";
