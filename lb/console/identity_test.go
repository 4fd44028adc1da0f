package console_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/holdfast-db/holdfast/lb/console"
)

// TestOperatorHeaderIsBelievedOnceAndAudited pins issue 34, problem 5, in
// the console: the header identity is trusted only from the trusted
// proxy (TestIdentityAndCrossSite) and only when it is unambiguous, as a
// proxy that appends to a client's copy would send two values or one
// joined with a comma (before the fix the first one counted, so a client
// could choose it); and a control records how its operator was
// established, shown on the request's page as asserted.
func TestOperatorHeaderIsBelievedOnceAndAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{identity: console.Identity{Header: userHeader}})
	for _, vals := range [][]string{{"mallory", "alice"}, {"mallory, alice"}} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
		req.Header.Set("Accept", "application/json")
		req.Header[userHeader] = vals
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "several values") || strings.Contains(string(b), `"operator":"alice"`) || strings.Contains(string(b), `"operator":"mallory"`) {
			t.Errorf("header %q: page %s", vals, b)
		}
	}

	var a answer
	if code := post(t, e, "/groups/"+e.pay+"/enable", "alice", `{"wait": true}`, &a); code != http.StatusOK || a.Result != "ok" {
		t.Fatalf("POST = %d %+v", code, a)
	}
	en, err := e.store.Entry(context.Background(), a.AuditID)
	if err != nil || en == nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(en.Origin.Via, "console: header "+userHeader+" from trusted proxy 127.0.0.1:") || en.Origin.OSUser == "" {
		t.Errorf("origin = %+v", en.Origin)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/audit/"+strconv.FormatInt(a.AuditID, 10), nil)
	req.Header.Set(userHeader, "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "(asserted: console: header "+userHeader+" from trusted proxy 127.0.0.1:") || !strings.Contains(string(b), `id="os-user"`) {
		t.Errorf("the request's page does not show the origin:\n%s", b)
	}
}
