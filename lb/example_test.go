package lb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// Drain a BIG-IP pool member before a deploy: force it offline, wait until
// its connections are gone, deploy, enable it again. The fake's
// connections decay by one step per poll.
func ExampleDrain() {
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 12, Decay: []int64{7, 2, 0}, Monitor: true})

	b, err := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := b.Login(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer b.Logout(ctx)

	m := lb.Member{Pool: "web", Node: "web-1", Port: 80}
	cfg := lb.DrainConfig{Interval: time.Millisecond, Timeout: time.Minute}
	res, err := lb.Drain(ctx, b, m, cfg, func(p lb.Poll) { fmt.Println("poll", p.Polls, p.Conns) })
	if err != nil {
		fmt.Println("abort the deploy:", err)
		return
	}
	fmt.Println(res.BeforeConns, "->", res.LastConns, res.After.Admin)

	// ... deploy ...

	if err := b.SetState(ctx, m, lb.Enabled); err != nil {
		fmt.Println(err)
		return
	}
	st, _ := b.State(ctx, m)
	fmt.Println(st.Admin, st.Detail)
	// Output:
	// poll 1 7
	// poll 2 2
	// poll 3 0
	// 12 -> 0 forced-offline
	// enabled session=monitor-enabled state=up
}

// When the connections do not go away within the bound, Drain says so and
// the deploy must not go ahead.
func ExampleDrain_timeout() {
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddNode("db-1", f5test.Member{Conns: 5, Decay: []int64{3}}) // a pooled client never lets go

	b, _ := f5.New(f5.Config{Endpoint: srv.URL(), Username: f5test.DefaultUsername, Password: f5test.DefaultPassword, HTTPClient: srv.Client()})
	ctx := context.Background()
	if err := b.Login(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer b.Logout(ctx)
	_, err := lb.Drain(ctx, b, lb.Member{Node: "db-1"}, lb.DrainConfig{Interval: time.Millisecond, Timeout: 20 * time.Millisecond}, nil)
	fmt.Println(errors.Is(err, lb.ErrNotDrained))
	fmt.Println(err)
	// Output:
	// true
	// lb: f5 db-1 not drained: 3 current connections after 20ms
}

// A configuration names balancers, groups of members and who may control
// which group.
func ExampleParseConfig() {
	cfg, err := lb.ParseConfig(strings.NewReader(`{
  "database": {"dsn_env": "HOLDFAST_LB_DSN"},
  "balancers": {
    "f5-prod": {"vendor": "f5", "endpoint": "https://bigip.example.net", "username": "deploy", "password_env": "F5_PASSWORD"}
  },
  "groups": {
    "payments": [
      {"balancer": "f5-prod", "pool": "payments_443", "node": "pay-1", "port": 443},
      {"balancer": "f5-prod", "pool": "payments_443", "node": "pay-2", "port": 443}
    ]
  },
  "operators": {"alice": ["payments"]},
  "drain": {"timeout": "90s"}
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ms, _ := cfg.Members("payments")
	fmt.Println(ms)
	fmt.Println(cfg.Operators.Check("alice", "payments"))
	fmt.Println(cfg.Operators.Check("bob", "payments"))

	_, err = lb.ParseConfig(strings.NewReader(`{"database": {"dsn": "x"}, "balancers": {"b": {"vendor": "citrix"}}}`))
	fmt.Println(err)
	// Output:
	// [f5-prod payments_443/pay-1:443 f5-prod payments_443/pay-2:443]
	// <nil>
	// lb: operator "bob" may not control group "payments"
	// lb: invalid balancers.b.vendor: must be "f5" or "a10" (got "citrix")
}
