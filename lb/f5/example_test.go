package f5_test

import (
	"context"
	"fmt"

	fakef5 "github.com/holdfast-db/holdfast/fakes/f5"
	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/f5"
)

// Force a pool member offline and read it back. BIG-IP reads back a state
// that differs from the one written; the client maps it.
func Example() {
	srv := fakef5.New(fakef5.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "10.0.0.7:443", fakef5.Member{Conns: 3, Monitor: true})

	c, err := f5.New(f5.Config{
		Endpoint:   srv.URL(), // "https://bigip.example.net" in production
		Username:   fakef5.DefaultUsername,
		Password:   fakef5.DefaultPassword,
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

	m := lb.Member{Pool: "web", Node: "10.0.0.7", Port: 443}
	st, _ := c.State(ctx, m)
	fmt.Println(st.Admin, "|", st.Detail)
	if err := c.SetState(ctx, m, lb.ForcedOffline); err != nil {
		fmt.Println(err)
		return
	}
	st, _ = c.State(ctx, m)
	n, _ := c.Connections(ctx, m)
	fmt.Println(st.Admin, "|", st.Detail, "|", n, "connections")
	// Output:
	// enabled | session=monitor-enabled state=up
	// forced-offline | session=user-disabled state=user-down | 0 connections
}
