package a10test_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/holdfast-db/holdfast/lb/a10/a10test"
)

// The fake speaks aXAPI v3. With statistics collection disabled, a server
// with live connections reports curr-conn 0: the pitfall a drain must
// refuse to trust.
func Example() {
	srv := a10test.New(a10test.Options{})
	defer srv.Close()
	srv.AddServer("app-1", a10test.Real{Conns: 30, StatsDisabled: true})

	send := func(method, path, sig string, body any) map[string]any {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL()+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "A10 "+sig)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return nil
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	auth := send("POST", "/axapi/v3/auth", "", map[string]any{"credentials": map[string]string{"username": a10test.DefaultUsername, "password": a10test.DefaultPassword}})
	sig := auth["authresponse"].(map[string]any)["signature"].(string)

	server := send("GET", "/axapi/v3/slb/server/app-1", sig, nil)["server"].(map[string]any)
	stats := send("GET", "/axapi/v3/slb/server/app-1/stats", sig, nil)["server"].(map[string]any)["stats"].(map[string]any)
	fmt.Println(server["stats-data-action"], stats["curr-conn"])
	send("POST", "/axapi/v3/logoff", sig, nil)
	fmt.Println(srv.ActiveSessions(), "sessions")
	// Output:
	// stats-data-disable 0
	// 0 sessions
}
