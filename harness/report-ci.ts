/**
 * A report for CI systems (README#kernel-repositories): JUnit XML (one testcase per check, its
 * class as the suite; fail and vacuous are failures, error an error, skip skipped with its reason)
 * and a markdown summary (the closing line, the counts, the unavailable backends, every check that
 * did not pass with its message and replay command) for a pull request's job page.
 */
import { closingLine, notRunOf, type Report } from "./report.ts";

const xml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]!)
  // characters XML 1.0 cannot hold
  .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "?");

export function junitXml(r: Report): string {
  const byClass = new Map<string, Report["checks"]>();
  for (const c of r.checks) byClass.set(c.class, [...(byClass.get(c.class) ?? []), c]);
  const count = (cs: Report["checks"], ...st: string[]) => cs.filter((c) => st.includes(c.status)).length;
  const secs = (ms: number) => (ms / 1000).toFixed(3);
  const total = (cs: Report["checks"]) => secs(cs.reduce((a, c) => a + c.ms, 0));
  const out = [`<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites name="nl-conformance" tests="${r.checks.length}" failures="${count(r.checks, "fail", "vacuous")}" errors="${count(r.checks, "error")}" skipped="${count(r.checks, "skip")}" time="${total(r.checks)}">`];
  for (const [cls, cs] of byClass) {
    out.push(`  <testsuite name="${xml(cls)}" tests="${cs.length}" failures="${count(cs, "fail", "vacuous")}" errors="${count(cs, "error")}" skipped="${count(cs, "skip")}" time="${total(cs)}">`);
    for (const c of cs) {
      const head = `    <testcase classname="${xml(cls)}" name="${xml(c.id)}" time="${secs(c.ms)}"`;
      const msg = c.message ?? c.status;
      const body = `${msg}\nreplay: ${c.replay}`;
      if (c.status === "pass") out.push(`${head}/>`);
      else if (c.status === "skip") out.push(`${head}><skipped message="${xml(msg)}"/></testcase>`);
      else if (c.status === "error") out.push(`${head}><error message="${xml(msg.split("\n")[0]!)}" type="error">${xml(body)}</error></testcase>`);
      else out.push(`${head}><failure message="${xml(msg.split("\n")[0]!)}" type="${c.status}">${xml(body)}</failure></testcase>`);
    }
    out.push("  </testsuite>");
  }
  out.push("</testsuites>");
  return out.join("\n") + "\n";
}

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

export function markdownSummary(r: Report, title = "nl-conformance"): string {
  const s = r.summary;
  const out = [`### ${title}`, "", `\`${closingLine(s, notRunOf(r))}\``, "",
    `seed ${r.run.seed}, profile ${r.run.profile}${r.run.filter ? `, selection ${r.run.filter}` : ""}, revision ${r.run.revision ?? "unknown"}`, "",
    "| pass | fail | vacuous | error | skip |", "|---|---|---|---|---|", `| ${s.pass} | ${s.fail} | ${s.vacuous} | ${s.error} | ${s.skip} |`];
  const down = r.run.backends.filter((b) => !b.available);
  if (down.length > 0) out.push("", "**Unavailable backends**", "", ...down.map((b) => `- \`${b.name}\`: ${cell(b.reason ?? "?")}`));
  const bad = r.checks.filter((c) => c.status === "fail" || c.status === "vacuous" || c.status === "error");
  if (bad.length > 0) {
    out.push("", "| check | status | message | replay |", "|---|---|---|---|");
    for (const c of bad) out.push(`| \`${c.id}\` | ${c.status} | ${cell((c.message ?? "").slice(0, 300))} | \`${cell(c.replay)}\` |`);
  }
  if (r.checks.length > 0 && r.checks.every((c) => c.status === "skip")) out.push("", "**Nothing ran: every check was skipped.**");
  return out.join("\n") + "\n";
}
