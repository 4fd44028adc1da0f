// Package storm simulates a fleet of pods reconnecting through an outage
// of a dependency (the database, or the token API that signs each
// connect), to compare retry strategies by the load they put on it.
//
// It runs on a virtual clock: a discrete-event loop over a priority queue,
// no goroutine and no sleep, deterministic for a seed. Each pod's pool
// retries its connects with the real retry code: a [retry.Loop] from
// [retry.Retrier.Start], stepped on the virtual clock, which makes the same
// decisions (delays, MaxElapsed, budget) as [retry.Retrier.Do].
//
// RESULTS.md describes the model and gives the figures; cmd/storm prints
// them and draws storm.png.
package storm
