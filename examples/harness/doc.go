// Package harness is what the side-by-side demos under examples/
// (switchover, failover, readers, outage, global, cloudsql) share. Each
// runs the same workload through a plain pgxpool and through a holdfast
// pool (and, in some, a database/sql client) against a simulator, prints a
// progress line a second, then a table with a column per client, or with
// -json the same result as one JSON object.
//
//   - [Command] is the command: it parses the flags ([Common] are the
//     options every demo has, [FlagSet] defines and checks flags), runs the
//     demo under a 5-minute bound, and prints the table or, with -json, the
//     JSON object ([WriteJSON]; the progress lines then go to stderr).
//   - [OpenPools] opens a demo's pools on configs alike.
//   - [Client], [Start] and [Workload] are the workload: workers per
//     client, each running its request one after the other (or, open-loop,
//     starting one every [Config].Every), each request recorded ([Record])
//     and counted for the progress lines ([Workload.Progress]);
//     [LongestGap] is a write demo's longest pause. [Workload.Play] plays
//     the demo's fault between a warmup and a settle.
//   - [Writer] runs a write demo's transaction the way each client does:
//     holdfast's runner (Factory.RunTx, sqldb.RunTx) or, for the
//     plain pool, the retry loop an application writes by hand, an unknown
//     outcome resolved by the request's id ([Writer.Do]), the plain
//     client's retry by [RetryPolicy]. [WriteClient] is a client writing
//     to its own table ([WriteDDL]), [Committed] the audit of its writes.
//   - [Counts] and [Writes] are the figures the demos share (a demo's
//     ClientResult embeds them; their JSON keys stand as its own), [Table]
//     prints them and the demo's own rows; [Client.PauseSeries] and
//     [Failures] draw them in a chart.
//   - [StartReadiness] and [SampleReadiness] are the holdfast pool's
//     readiness, as a service would serve it and a prober would ask.
//
// [FakeConnector], a fake Cloud SQL connector dialled once per connect,
// serves the demo and otel examples too.
//
// Package harnesstest has the demos' tests' helpers. Like examples/timeline,
// this is a helper of those demos, not part of holdfast's API, and makes no
// compatibility promise.
package harness
