// Package deploy runs the whole deploy of a group behind an L4 load
// balancer, the workflow of holdfast-lb deploy GROUP -- COMMAND [ARGS],
// with the group's lock held from the first step to the last:
//
//	permission, lock → silence the alerts → drain to zero connections
//	  → not drained: stop, exit 1, the command never runs
//	  → drained: run the command → enable (or, if it failed and asked,
//	    leave the members forced offline and say so)
//	→ expire the silence → release the lock
//
// The drain and the enable go through an [lb.Controller], so they are
// permitted, audited and notified like any request; the deploy notifies
// a failed command or silence itself ([lb.EventDeployFailed]). The
// silence ([Silencer], package alertmanager) is bounded by its maximum
// duration and expired on every path once made. The command gets the
// group in its environment: HOLDFAST_LB_GROUP, HOLDFAST_LB_OPERATOR,
// HOLDFAST_LB_NODES (the node names, space-separated),
// HOLDFAST_LB_AUDIT_ID (the drain's audit entry) and
// HOLDFAST_LB_SILENCE_ID. When the deploy's context ends during the
// command, the command gets SIGTERM (SIGKILL 10 s later) and the members
// are left forced offline.
//
// [Run] returns an [*Error] naming the [Step] that stopped the deploy
// and what state the group is left in.
package deploy
