package harness

import (
	"fmt"
	"io"
	"strings"

	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// ClusterMode prints how a simulated cluster's servers are reached: on
// 127.0.0.1 at a port each, or at an address each, which addresses names
// ("two addresses").
func ClusterMode(w io.Writer, c *failovertest.Cluster, addresses string) {
	var parts []string
	for _, id := range c.ServerIDs() {
		parts = append(parts, id+" "+c.Addr(id))
	}
	list := strings.Join(parts, ", ")
	if c.SingleIP {
		fmt.Fprintf(w, "mode: single address: the servers listen on 127.0.0.1, each on its own port (%s)\n", list)
		return
	}
	fmt.Fprintf(w, "mode: %s (%s)\n", addresses, list)
}
