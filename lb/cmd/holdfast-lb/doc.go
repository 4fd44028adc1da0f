// Command holdfast-lb drains and controls groups of L4 load-balancer
// members (F5 BIG-IP, A10 ACOS) around a deploy, from a shell or a
// pipeline.
//
//	holdfast-lb [-config FILE] [-operator NAME] COMMAND [flags] GROUP
//
// Commands:
//
//	status GROUP          each member: Enabled / Disabling / Disabled,
//	                      admin state, connections, and the lock holder
//	enable GROUP          accept new connections again (after the deploy)
//	disable GROUP         no new connections; persistent ones still served
//	forced-offline GROUP  no new connections at all; do not wait
//	drain GROUP           forced-offline, then wait until no connection is
//	                      left, printing a progress line; exit 1 if some
//	                      remain at the timeout
//	check-config          validate the configuration file
//
// Command flags: -node NAME (repeatable) acts on some nodes of the group;
// -interval, -timeout and -concurrency override the configuration's drain
// settings; -restore-on-failure puts the members back as they were when a
// drain fails.
//
// The configuration is a JSON file (see [github.com/holdfast-db/holdfast/lb.Config]),
// from -config or $HOLDFAST_LB_CONFIG. The operator comes from -operator,
// $HOLDFAST_LB_OPERATOR or $USER, and must be allowed the group. Every
// control request takes the group's lock in PostgreSQL and is audited
// there and as a JSON log line on standard error. Passwords and DSNs are
// never printed.
//
// Exit codes:
//
//	0  done
//	1  not drained: connections remained at the timeout; abort the deploy
//	2  usage or configuration error
//	3  refused: not permitted, or the group is locked by someone else
//	4  failed: balancer, database or state error, or interrupted
//
// A pipeline:
//
//	holdfast-lb -operator "$BUILD_USER" drain payments || exit 1
//	./deploy.sh payments
//	holdfast-lb -operator "$BUILD_USER" enable payments
package main
