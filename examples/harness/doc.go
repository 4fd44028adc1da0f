// Package harness is what the side-by-side demos under examples/
// (switchover, failover, readers) share: each runs the same workload
// through a plain pgxpool and through a holdfast pool (and, in some, a
// database/sql client) against a simulator, prints a progress line a
// second, then a table with a column per client, or with -json the same
// result as one JSON object.
//
//   - [Command] is the command's scaffolding: it parses the flags, runs the
//     demo under a 5-minute bound, and prints the table or, with -json, the
//     JSON object (the progress lines then go to stderr). [Common] are the
//     options every demo has and [FlagSet] defines their flags and checks.
//   - [Client] and [Workload] are the workload: workers per client, each
//     running its request one after the other, each request recorded
//     ([Record]) and counted for the progress lines ([Workload.Progress]).
//   - [Writer] runs a write demo's transaction the way each client does:
//     holdfast's runner (Factory.BeginTxFunc, sqldb.BeginTxFunc) or, for the
//     plain pool, the retry loop an application writes by hand; [Writes] and
//     [Counts] are the figures the demos share, [Table] prints them.
//
// Package harnesstest has the demos' tests' helpers. Like examples/timeline,
// this is a helper of those demos, not part of holdfast's API, and makes no
// compatibility promise.
package harness
