/** Progress: a live line with elapsed time and ETA on a terminal, a plain line every ~5 s otherwise. */
import { expect, test } from "bun:test";
import type { CheckDef } from "../harness/check.ts";
import { formatSeconds, printable, Progress, type ProgressSink } from "../harness/progress.ts";
import { estimates, loadTimes } from "../harness/shard.ts";

const defs = ["C2/a", "C2/b", "C2/c", "C2/d"].map((id) => ({ id, class: "C2", kind: "skipped", subject: {}, spec: "", tolerance: {}, reason: "" }) as CheckDef);

function sink(isTTY: boolean): ProgressSink & { text: string } {
  const s = { isTTY, columns: 200, text: "", write: (x: string) => void (s.text += x) };
  return s;
}

test("on a terminal: one redrawn line with a bar, the count, elapsed time and an ETA at this run's pace", () => {
  let t = 0;
  const out = sink(true);
  const p = new Progress(defs, out, () => t);
  t = 10_000;
  p.finished("C2/a", "C2/b");
  expect(out.text.startsWith("\r\x1b[2K[######")).toBe(true);
  // Every check of this class is estimated alike, so one done in 10 s leaves three: 30 s.
  expect(out.text).toContain("1/4 checks, elapsed 10 s, ETA 30 s  C2/b");
  expect(out.text).not.toContain("\n");
  p.print("a line of output", (s) => { out.text += `${s}\n`; });
  expect(out.text.endsWith("\r\x1b[2Ka line of output\n")).toBe(true);
});

test("elsewhere: a plain progress line only when ~5 s passed since the last", () => {
  let t = 0;
  const out = sink(false);
  const p = new Progress(defs, out, () => t);
  t = 1_000;
  p.finished("C2/a");
  expect(out.text).toBe("");
  t = 6_000;
  p.finished("C2/b");
  expect(out.text).toBe("progress: 2/4 checks, elapsed 6 s, ETA 6 s\n");
  t = 7_000;
  p.finished("C2/c");
  expect(out.text.split("\n").length).toBe(2);
});

test("formatSeconds", () => {
  expect(formatSeconds(4_400)).toBe("4 s");
  expect(formatSeconds(125_000)).toBe("2 min 05 s");
});

test("a short run's ETA: start-up before the first check does not multiply the estimate", () => {
  const many = Array.from({ length: 100 }, (_, i) => ({ ...defs[0]!, id: `C2/m${i}` }) as CheckDef);
  const each = estimates(many, loadTimes()).get("C2/m0")!;
  let t = 0;
  const out = sink(false);
  const p = new Progress(many, out, () => t);
  // The first check finishes 3 s in: nearly all of it was start-up, not the check.
  t = 6_000;
  p.finished("C2/m0");
  expect(out.text).toBe(`progress: 1/100 checks, elapsed 6 s, ETA ${formatSeconds(99 * each)}\n`);
});

test("printable: control bytes from files or children are escaped, newlines and tabs kept", () => {
  expect(printable("bad\u0000name\u001b[31m\tok\n")).toBe("bad\\x00name\\x1b[31m\tok\n");
});
