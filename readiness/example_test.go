package readiness_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The drain procedure and its lock, with no database: the pool is never
// asked for a connection, so it never dials.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := readiness.New(readiness.Config{DrainInterval: time.Millisecond}, readiness.Pool(pool))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	end := c.Begin() // a request in flight

	// Alice drains with a short bound: the request is still there.
	_, err = c.Drain(ctx, "alice", readiness.WithDrainTimeout(20*time.Millisecond))
	fmt.Println(err)

	// Bob may not drive the node while Alice holds it.
	_, err = c.Drain(ctx, "bob")
	var locked *readiness.LockedError
	fmt.Println(errors.As(err, &locked), locked.Holder)

	// The request ends; Alice drains again and the traffic is proven gone.
	end()
	res, err := c.Drain(ctx, "alice")
	fmt.Println(res.Owner, err, c.Status().Drain.State)
	fmt.Println(c.Status())

	// The deploy is done: back in service (still "starting": this example
	// never opens the startup gate).
	c.Enable()
	fmt.Println(c.Status().Drain.State, c.Status())
	// Output:
	// readiness: drain by "alice" timed out after 20ms: still in use: 1 in-flight request; service stays Disabling
	// true alice
	// alice <nil> Disabled
	// not ready: draining (Disabled by "alice")
	// Enabled not ready: starting
}

// The probe handler answers 503 until the startup gate opens; here no
// database answers (the check is refused at once).
func ExampleChecker_ReadyHandler() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@127.0.0.1:1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := readiness.New(readiness.Config{}, readiness.Pool(pool))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	srv := httptest.NewServer(c.ReadyHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output:
	// 503 not ready: starting
}

// A service wired for Kubernetes: probes on the service's port, the drain
// endpoint and the details on a loopback admin listener, counted requests,
// and a shutdown on SIGTERM that loses no request.
func ExampleChecker_Serve() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Configure(cfg); err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool))
	if err != nil {
		log.Fatal(err)
	}

	app := http.NewServeMux()
	app.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		conn, err := f.Acquire(r.Context(), pool)
		if err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		defer conn.Release()
		// ... use conn ...
	})
	mux := http.NewServeMux()
	mux.Handle("/readyz", c.ReadyHandler()) // status and reason only
	mux.Handle("/livez", c.LiveHandler())
	mux.Handle("/", c.Middleware(app))
	admin := http.NewServeMux()
	admin.Handle("/readyz", c.AdminHandler()) // the details
	admin.Handle("/drain", c.DrainHandler())  // local callers only: no Config.Authorize

	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// Serve opens the startup gate, serves, and on SIGTERM drains, shuts
	// the servers down and closes the pool.
	if err := c.Serve(ctx, srv, readiness.ServeConfig{
		Admin: &http.Server{Addr: "127.0.0.1:8081", Handler: admin, ReadHeaderTimeout: 10 * time.Second},
	}); err != nil {
		log.Print(err)
	}
}
