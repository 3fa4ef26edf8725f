/**
 * How a check's case is named for a replay: the check's own seed (from the run's seed and its id)
 * and the command that replays one case where the run started. The runner (run.ts), the kernel
 * children and the parent that reads their results (child-process.ts) name cases alike.
 */
import { fnv1a } from "../src/rng.ts";
import type { CheckDef, Profile } from "./check.ts";
import { environment } from "../environment.ts";

/** A check's own seed: FNV-1a of its id, mixed with the run seed (so filtering changes nothing). */
export function checkSeed(runSeed: number, id: string): number {
  return fnv1a(id, 0x811c9dc5 ^ (runSeed >>> 0)) & 0x7fffffff;
}

/** Quotes a word for a POSIX shell when it needs it. */
function shellWord(w: string): string {
  return /^[\w./:=@%+,-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command the run was started with, as a replay line spells it: `npx nlc` when started through
 * the installed package's command (bin/nlc.js says so in NLC_COMMAND, inherited by the runner and
 * its children), else `npm run conformance --` (this repository).
 */
function commandWords(): string[] {
  return environment().NLC_COMMAND === "npx nlc" ? ["npx", "nlc"] : ["npm", "run", "conformance", "--"];
}

/**
 * The command that replays one case where the run started: through npm (npx for the installed
 * command), so no global Bun is needed, with the options that rebuild the check's catalogue (extra
 * fixtures, a library backend).
 */
export function replayCommand(id: string, seed: number, path: string, args: readonly string[] = []): string {
  return [...commandWords(), ...args, "--replay", `${id}:${seed}:${path}`].map(shellWord).join(" ");
}

/**
 * Everything the replay command needs besides the id, seed and path: the options that rebuild the
 * check's catalogue (its own replayArgs, e.g. --fixtures DIR), the backend it ran on (a `lib:`
 * backend exists only when named), and the profile it ran under (the generators of some checks
 * size their cases by profile, so a path is only meaningful under the same one).
 */
export function replayArgsOf(def: Pick<CheckDef<any>, "replayArgs" | "subject">, profile: Profile): string[] {
  const args = [...(def.replayArgs ?? [])];
  const backend = def.subject.backend;
  if (backend !== undefined && !args.includes("--backend")) args.push("--backend", backend);
  return withProfile(args, profile);
}

/**
 * The options with the profile pinned, the default too: the line is replayed where a config file
 * may set another profile, and an option overrides the file.
 */
export function withProfile(args: readonly string[], profile: Profile): string[] {
  return args.includes("--profile") ? [...args] : [...args, "--profile", profile];
}
