// Package faults is holdfast's fault suite: real PostgreSQL servers
// (fakes/pgtest) behind a real fault-injection proxy (toxiproxy, embedded
// in the test binary) and a plain pgxpool as the control. It has only
// tests, so that no user's module loads toxiproxy.
package faults_test
