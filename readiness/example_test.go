package readiness_test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/readiness"
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

// Serve on SIGTERM (here: ctx ends): readiness answers 503 at once, the
// request in flight finishes, and the port keeps serving for ShutdownDelay
// (default 10s: the time load balancers and kube-proxy need to see the
// 503 and stop sending) before it closes. No database answers here; the
// drain waits for the request.
func ExampleChecker_Serve() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@127.0.0.1:1/app")
	if err != nil {
		log.Fatal(err)
	}
	c, err := readiness.New(readiness.Config{DrainInterval: time.Millisecond}, readiness.Pool(pool))
	if err != nil {
		log.Fatal(err)
	}
	inFlight, finish := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/readyz", c.ReadyHandler())
	mux.Handle("/", c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inFlight)
		<-finish
		fmt.Fprint(w, "done")
	})))

	ln, err := net.Listen("tcp", "127.0.0.1:0") // a service: Addr ":8080"
	if err != nil {
		log.Fatal(err)
	}
	ctx, sigterm := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		// Serve opens the startup gate, serves, and on SIGTERM (or when
		// ctx ends) drains, keeps serving for ShutdownDelay, shuts the
		// server down and closes the pool.
		served <- c.Serve(ctx, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, readiness.ServeConfig{
			Listener:      ln,
			ShutdownDelay: 50 * time.Millisecond, // default 10s; short for the example
		})
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) string {
		resp, err := client.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b)))
	}

	answer := make(chan string)
	go func() { answer <- get("/work") }()
	<-inFlight
	sigterm()
	deadline := time.Now().Add(10 * time.Second)
	for get("/readyz") != "503 not ready: draining" && time.Now().Before(deadline) { // the drain waits for /work
		time.Sleep(time.Millisecond)
	}
	fmt.Println("during the drain: /readyz", get("/readyz"))
	close(finish)
	fmt.Println("the request in flight:", <-answer)
	fmt.Println("Serve:", <-served)
	// Output:
	// during the drain: /readyz 503 not ready: draining
	// the request in flight: 200 done
	// Serve: <nil>
}

// Config.Authorize admits the callers of the admin handlers with a token
// and names the owner of a drain: the token's holder, and the job the
// caller names.
func ExampleConfig_authorize() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@127.0.0.1:1/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	token := "s3cret" // a service reads it from a secret
	c, err := readiness.New(readiness.Config{
		Authorize: func(r *http.Request) (string, error) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
				return "", errors.New("no valid admin token")
			}
			return "ops/" + r.Header.Get("X-Drain-Owner"), nil // who drains: the token's holder, and the job it names
		},
	}, readiness.Pool(pool))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	drain := func(auth string) {
		req := httptest.NewRequest("POST", "http://10.0.0.7:8081/drain", nil) // from another host
		req.Header.Set("X-Drain-Owner", "deploy-42")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		c.DrainHandler().ServeHTTP(rec, req)
		var body struct{ Owner, State, Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusOK {
			fmt.Println(rec.Code, body.Error)
			return
		}
		fmt.Println(rec.Code, body.State, "by", body.Owner)
	}
	drain("")
	drain("Bearer " + token)
	// Output:
	// 403 readiness: forbidden
	// 200 Disabled by ops/deploy-42
}
