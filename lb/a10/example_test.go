package a10_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/a10"
	"github.com/holdfast-db/holdfast/lb/a10/a10test"
)

// A server whose statistics collection is disabled reads 0 connections
// whatever its traffic; the client refuses to report that 0.
func Example() {
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Conns: 30, StatsDisabled: true, Ports: []a10test.Port{{Number: 8080, Conns: 4}}})

	c, err := a10.New(a10.Config{
		Endpoint:   srv.URL(), // "https://thunder.example.net" in production
		Username:   a10test.DefaultUsername,
		Password:   a10test.DefaultPassword,
		HTTPClient: srv.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := c.Login(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer c.Logout(ctx)

	_, err = c.Connections(ctx, lb.Member{Node: "app-1"})
	ae, ok := errors.AsType[*lb.APIError](err)
	fmt.Println(ok && ae.Kind == lb.KindStatsDisabled)

	srv.SetStatsDisabled("app-1", false)
	port := lb.Member{Node: "app-1", Port: 8080}
	n, _ := c.Connections(ctx, port)
	_ = c.SetState(ctx, port, lb.ForcedOffline)
	st, _ := c.State(ctx, port)
	fmt.Println(n, st.Admin, st.Availability, st.Detail)
	// Output:
	// true
	// 4 forced-offline Disabled action=disable server-action=enable
}
