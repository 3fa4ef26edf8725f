/**
 * A setting or argument that cannot be used: the commands print its message, which names the
 * setting, the file or the field, and exit with status 2 (docs/spec/conformance.md). One class for
 * every command (the run, sweep, the report commands, the fixture generator), so a usage error
 * raised in code they share is a usage error in each of them.
 */
export class UsageError extends Error {}
