/** `<subcommand> --help` prints that subcommand's part of the help and exits 0 (it was an unknown option, exit 2). */
import { expect, test } from "bun:test";
import { ROOT } from "../paths.ts";

const run = (...args: string[]) => Bun.spawnSync({ cmd: [process.execPath, "conformance/cli.ts", ...args], cwd: ROOT, stdout: "pipe", stderr: "pipe" });

test("sweep, sweep-merge, the report commands and selftest answer --help and -h", () => {
  for (const [args, says] of [[["sweep", "--help"], "sweep --seeds S"], [["sweep-merge", "-h"], "sweep-merge A B"], [["diff", "--help"], "diff OLD NEW"], [["selftest", "--help"], "selftest"]] as const) {
    const p = run(...args);
    expect({ args, exit: p.exitCode, says: p.stdout.toString().includes(says) }).toEqual({ args, exit: 0, says: true });
  }
});

test("an unknown option of a subcommand is still a usage error", () => {
  expect(run("sweep", "--seedz", "1..2").exitCode).toBe(2);
});
