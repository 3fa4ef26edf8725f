/**
 * `npm run conformance` — the entry point. A command line that runs checks is first handed to a
 * supervised runner (conformance/supervise.ts) before anything else is loaded, so the supervisor
 * costs a process start and no module graph; the runner, and every other command, is
 * conformance/cli-main.ts.
 */
import { isRunner, runsChecks, superviseSelf } from "./supervise.ts";

if (!isRunner() && runsChecks(process.argv.slice(2))) process.exit(await superviseSelf());
await import("./cli-main.ts");
