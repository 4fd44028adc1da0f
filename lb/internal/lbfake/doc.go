// Package lbfake is the scaffolding shared by the fake load-balancer
// APIs in lb/f5/f5test and lb/a10/a10test: an httptest server that
// records every request, tracks how many are in flight, holds requests on
// demand ([Server.Hold]) and matches injected faults ([Server.Inject]).
// What a fault answers, and every wire shape, stays with the vendor
// package, which receives each request through a [Handler].
package lbfake
