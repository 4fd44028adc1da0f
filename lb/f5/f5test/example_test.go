package f5test_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/holdfast-db/holdfast/lb/f5/f5test"
)

// The fake speaks iControl REST: log in for a token, force a pool member
// offline, and read its current connections as they decay, one value per
// stats read.
func Example() {
	srv := f5test.New(f5test.Options{})
	defer srv.Close()
	srv.AddPoolMember("web", "web-1:80", f5test.Member{Conns: 12, Decay: []int64{4, 0}, Monitor: true})

	send := func(method, path, token string, body any) map[string]any {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL()+path, bytes.NewReader(b))
		req.Header.Set("X-F5-Auth-Token", token)
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
	login := send("POST", "/mgmt/shared/authn/login", "", map[string]string{"username": f5test.DefaultUsername, "password": f5test.DefaultPassword})
	token := login["token"].(map[string]any)["token"].(string)

	const member = "/mgmt/tm/ltm/pool/~Common~web/members/~Common~web-1:80"
	m := send("PATCH", member, token, map[string]string{"session": "user-disabled", "state": "user-down"})
	fmt.Println(m["session"], m["state"])
	for range 3 {
		stats := send("GET", member+"/stats", token, nil)["entries"].(map[string]any)
		for _, e := range stats {
			cur := e.(map[string]any)["nestedStats"].(map[string]any)["entries"].(map[string]any)["serverside.curConns"]
			fmt.Println(cur.(map[string]any)["value"])
		}
	}
	send("DELETE", "/mgmt/shared/authz/tokens/"+token, token, nil)
	fmt.Println(srv.ActiveTokens(), "active tokens")
	// Output:
	// user-disabled user-down
	// 4
	// 0
	// 0
	// 0 active tokens
}
