package lb_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// TestOverlappingGroups pins issue 34, problem 4: groups may overlap
// ("all-web" holds a member of "payments"), and a group's lock covers its
// members, on their device, so that while alice holds payments nobody
// drives payments' member through another group. Before the fix bob's
// disable through all-web ran (result ok) under alice's lock.
//
// It also pins what the member locks mean: an F5 node and a pool member
// on it exclude each other, two pool members of one node do not, two
// balancer names of one device lock the same members, a refused request
// holds nothing (all or nothing), and a lease of the group alone cannot
// carry a request that drives its members.
func TestOverlappingGroups(t *testing.T) {
	t.Parallel()
	srv, fc := newF5(t, f5test.Options{})
	// A second name for the same device, as a second team's configuration
	// would have it.
	alias, err := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := newStore(t)
	pay, all, search, node, pay8443, other := uniq("payments"), uniq("all-web"), uniq("search"), uniq("node-pay-1"), uniq("payments-8443"), uniq("other-team")
	groups := map[string][]lb.Target{
		pay:     {f5Member("payments_443", "pay-1", 443)},
		all:     {f5Member("payments_443", "pay-1", 443), f5Member("web", "web-1", 80)},
		search:  {f5Member("web", "web-1", 80)},
		node:    {{Balancer: "f5", Member: lb.Member{Node: "pay-1"}}},
		pay8443: {f5Member("payments_8443", "pay-1", 8443)},
		other:   {{Balancer: "bigip-alias", Member: lb.Member{Pool: "payments_443", Node: "pay-1", Port: 443}}},
	}
	srv.AddPoolMember("payments_443", "pay-1:443", f5test.Member{Conns: 1})
	srv.AddPoolMember("payments_8443", "pay-1:8443", f5test.Member{Conns: 1})
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 1})
	srv.AddNode("pay-1", f5test.Member{Conns: 2})
	ctrl, err := lb.NewController(lb.ControllerConfig{
		Balancers: map[string]lb.Balancer{"f5": fc, "bigip-alias": alias},
		Groups:    groups,
		Permissions: lb.Permissions{"alice": {pay}, "bob": {all}, "carol": {search}, "dave": {node},
			"erin": {pay8443}, "frank": {other}},
		Locker: store, Audit: store, Drain: fast, Host: "test-host",
		Logger: slog.New(slog.NewJSONHandler(&syncBuffer{}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, _, err := ctrl.Acquire(ctx, lb.Request{Operator: "alice", Action: lb.ActionDrain, Group: pay})
	if err != nil {
		t.Fatalf("alice's lock of %s: %v", pay, err)
	}
	defer lease.Release(ctx)

	refused := func(op, group, member string) {
		t.Helper()
		before := len(srv.Requests())
		out, err := ctrl.Do(ctx, lb.Request{Operator: op, Action: lb.ActionDisable, Group: group})
		le, ok := errors.AsType[*lb.LockedError](err)
		if !ok || out.Entry.Result != lb.ResultLocked {
			t.Fatalf("%s's disable of %s while alice holds %s: result %s, error %v; want locked", op, group, pay, out.Entry.Result, err)
		}
		if le.Member != member || le.Holder.Owner != "alice" || le.Holder.Group != pay || le.Group != group {
			t.Errorf("refusal = %+v, want member %q held by alice through %s", le, member, pay)
		}
		if want := "its member " + member + ` is held through group "` + pay + `"`; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "locked by alice@") {
			t.Errorf("error = %q, want it to say %q", err, want)
		}
		if n := len(srv.Requests()) - before; n != 0 {
			t.Errorf("the refused request made %d balancer calls", n)
		}
	}
	refused("bob", all, "f5 payments_443/pay-1:443")              // the same member through another group
	refused("dave", node, "f5 pay-1")                             // the node under alice's pool member
	refused("frank", other, "bigip-alias payments_443/pay-1:443") // the same device under another name
	if st, _ := srv.MemberState("payments_443", "pay-1:443"); st.Session != "user-enabled" {
		t.Errorf("pay-1:443 = %+v: changed by a refused request", st)
	}

	// Not over-locked: another pool member of the node, and the rest of
	// all-web that bob's refused request did not keep.
	for _, r := range []lb.Request{{Operator: "erin", Group: pay8443}, {Operator: "carol", Group: search}} {
		r.Action = lb.ActionDisable
		if out, err := ctrl.Do(ctx, r); err != nil || out.Entry.Result != lb.ResultOK {
			t.Errorf("%s's disable of %s = %v, want ok", r.Operator, r.Group, err)
		}
		r.Action = lb.ActionEnable
		if _, err := ctrl.Do(ctx, r); err != nil {
			t.Errorf("%s's enable of %s = %v", r.Operator, r.Group, err)
		}
	}

	// A lease of the group alone (no members) does not carry a request.
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	bare, err := store.Lock(ctx, pay, "alice")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ctrl.Do(ctx, lb.Request{Operator: "alice", Action: lb.ActionDisable, Group: pay, Lease: bare})
	if !errors.Is(err, lb.ErrInvalidConfig) || out.Entry.Result != lb.ResultInvalid || !strings.Contains(err.Error(), "Controller.Acquire") {
		t.Errorf("a request under a lease without the members = %v (%s), want invalid", err, out.Entry.Result)
	}
	if err := bare.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// alice gone, bob goes ahead; the audit has his refusal naming alice.
	if out, err := ctrl.Do(ctx, lb.Request{Operator: "bob", Action: lb.ActionDisable, Group: all}); err != nil || out.Entry.Result != lb.ResultOK {
		t.Fatalf("bob's disable of %s once alice let go = %v", all, err)
	}
	es, err := store.Entries(ctx, all, 0)
	if err != nil || len(es) != 2 || es[1].Result != lb.ResultLocked || !strings.Contains(es[1].Error, "held through group") {
		t.Errorf("audit of %s = %+v, %v", all, es, err)
	}
}

// TestLockMembersAllOrNothing pins the store's side of problem 4: member
// locks are taken with the group's, all or none; a refusal names the
// holder of the member (shared node locks included); a holder's crash
// frees its members; Release frees them.
func TestLockMembersAllOrNothing(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	ctx := context.Background()
	dev := "f5 " + uniq("bigip") + ":443 Common"
	m := func(pool, node string, port int) lb.LockMember {
		mb := lb.Member{Pool: pool, Node: node, Port: port}
		return lb.LockMember{Device: dev, Member: mb, Name: "f5 " + mb.String()}
	}
	p1, p2, w1, n1 := m("pay", "pay-1", 443), m("pay2", "pay-1", 8443), m("web", "web-1", 80), m("", "pay-1", 0)
	gA, gB, gC, gD := uniq("a"), uniq("b"), uniq("c"), uniq("d")

	a, err := store.Lock(ctx, gA, "alice", p1, p2)
	if err != nil {
		t.Fatal(err)
	}
	// bob's second member is alice's: he gets nothing, not even web-1.
	_, err = store.Lock(ctx, gB, "bob", w1, p2)
	le, ok := errors.AsType[*lb.LockedError](err)
	if !ok || le.Member != p2.Name || le.Holder.Owner != "alice" || le.Holder.Group != gA {
		t.Fatalf("bob's lock = %v (%+v), want refused on %s held by alice", err, le, p2.Name)
	}
	c, err := store.Lock(ctx, gC, "carol", w1)
	if err != nil {
		t.Fatalf("carol's lock of web-1 after bob's refusal = %v: the refusal kept a lock", err)
	}
	// The whole node is refused while pool members on it are held
	// (shared), naming one of their holders.
	if _, err := store.Lock(ctx, gD, "dave", n1); !errors.Is(err, lb.ErrLocked) || !strings.Contains(err.Error(), "alice") {
		t.Errorf("dave's lock of the node = %v, want refused by alice", err)
	}
	// alice crashes: her session ends and her members are free.
	crash(ctx, t, pool, a.Holder().PID)
	d, err := store.Lock(ctx, gD, "dave", n1)
	if err != nil {
		t.Fatalf("dave's lock of the node after alice's crash = %v", err)
	}
	if _, err := store.Lock(ctx, gA, "alice", p1); !errors.Is(err, lb.ErrLocked) || !strings.Contains(err.Error(), "dave") {
		t.Errorf("alice's pool member under dave's node = %v, want refused by dave", err)
	}
	for _, l := range []lb.Lease{c, d} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM holdfast_lb_lock_member WHERE group_name = ANY($1)", []string{gC, gD}).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("member rows after release = %d, %v", rows, err)
	}
	all, err := store.Lock(ctx, gB, "bob", w1, p2, p1, n1)
	if err != nil {
		t.Fatalf("bob's lock once everyone let go = %v", err)
	}
	_ = all.Release(ctx)
	if _, err := store.Lock(ctx, gB, "bob", lb.LockMember{Member: lb.Member{Node: "x"}}); !errors.Is(err, lb.ErrInvalidConfig) {
		t.Errorf("a member without a device = %v, want ErrInvalidConfig", err)
	}
}
