package f5_test

import (
	"context"
	"fmt"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/f5"
	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// Force a pool member offline and read it back. BIG-IP reads back a state
// that differs from the one written; the client maps it.
func Example() {
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "10.0.0.7:443", f5test.Member{Conns: 3, Monitor: true})

	c, err := f5.New(f5.Config{
		Endpoint:   srv.URL(), // "https://bigip.example.net" in production
		Username:   f5test.DefaultUsername,
		Password:   f5test.DefaultPassword,
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
