// Package bgroute is the blue/green engine behind package bluegreen: the
// Router of one pool (its two metadata monitors, its switchover timer, its
// routing snapshot) and its layer of the pool's hooks (compose.Layer),
// which internal/conn adds to every pool of a factory WithBlueGreen.
// bluegreen holds what users see (Config, Status, the errors, Rule) and
// its Router interface, which *Router implements.
//
// Beneath it, meta reads the metadata and the topology, and switchover is
// the phase machine and the routing it decides; the Router serializes
// their calls, keeps time and does the I/O.
package bgroute

import "github.com/holdfast-db/holdfast/bluegreen"

var _ bluegreen.Router = (*Router)(nil)
