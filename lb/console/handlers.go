package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/lb"
)

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("GET /groups/{group}", c.groupPage)
	mux.HandleFunc("POST /groups/{group}/{action}", c.control)
	mux.HandleFunc("GET /audit/{id}", c.auditPage)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	if c.cfg.Metrics != nil {
		mux.Handle("GET /metrics", c.cfg.Metrics)
	}
	static, _ := fs.Sub(files, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	return securityHeaders(http.NewCrossOriginProtection().Handler(mux))
}

// securityHeaders keeps the page out of frames and its scripts and styles
// to its own files.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// wantsJSON reports whether the client asked for JSON: ?format=json, or
// an Accept header preferring application/json to text/html.
func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	jq, hq := -1.0, -1.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case "application/json":
			jq = max(jq, q)
		case "text/html", "*/*":
			hq = max(hq, q)
		}
	}
	return jq > 0 && jq > hq
}

// fragment reports whether the refresh script asks for the content only.
func fragment(r *http.Request) bool { return r.Header.Get("X-Holdfast-Fragment") == "1" }

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	v := c.view(r.Context(), r, c.groups, c.cfg.AuditRows)
	c.respond(w, r, http.StatusOK, "overview", v)
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request) {
	g := r.PathValue("group")
	if _, ok := c.cfg.Groups[g]; !ok {
		c.fail(w, r, http.StatusNotFound, "no group "+strconv.Quote(g))
		return
	}
	v := c.view(r.Context(), r, []string{g}, DefaultDetailRows)
	v.Detail = true
	c.respond(w, r, http.StatusOK, "group", v)
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, http.StatusBadRequest, "the audit id must be a positive integer")
		return
	}
	op, why := c.operator(r)
	e, err := c.cfg.Store.Entry(r.Context(), id)
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "reading the audit trail: "+err.Error())
		return
	}
	if e == nil {
		c.fail(w, r, http.StatusNotFound, "no audit entry #"+strconv.FormatInt(id, 10))
		return
	}
	holders, _ := c.cfg.Store.Holders(r.Context())
	ev := entryOf(*e, holders)
	v := pageView{Title: c.cfg.Title, Operator: op, ReadOnly: why, Now: time.Now(), RefreshMS: c.cfg.Refresh.Milliseconds(), Entry: &ev}
	c.respond(w, r, http.StatusOK, "audit", v)
}

// respond writes v as JSON, as the content fragment, or as the page.
func (c *Console) respond(w http.ResponseWriter, r *http.Request, status int, page string, v pageView) {
	if wantsJSON(r) {
		writeJSON(w, status, v)
		return
	}
	name := page
	if fragment(r) {
		name = page + "-content"
	}
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, name, v); err != nil {
		c.cfg.Logger.Error("lb console: rendering a page", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "the page did not render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, `{"error":"cannot encode the answer"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errorBody is the JSON answer of a failed request.
type errorBody struct {
	Error  string      `json:"error"`
	Result string      `json:"result,omitempty"`
	Holder *holderView `json:"holder,omitempty"`
	Entry  *entryView  `json:"entry,omitempty"`
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		writeJSON(w, status, errorBody{Error: msg})
		return
	}
	op, why := c.operator(r)
	v := pageView{Title: c.cfg.Title, Operator: op, ReadOnly: why, Now: time.Now(), Error: msg, Status: status}
	c.respond(w, r, status, "error", v)
}

// controlBody is the JSON body a script may post to a control path.
type controlBody struct {
	Nodes []string `json:"nodes"`
	Wait  bool     `json:"wait"`
}

// controlAnswer is the JSON answer of a control request.
type controlAnswer struct {
	AuditID  int64       `json:"audit_id"`
	Result   string      `json:"result"`
	Error    string      `json:"error,omitempty"`
	Holder   *holderView `json:"holder,omitempty"`
	Location string      `json:"location,omitempty"`
	Entry    *entryView  `json:"entry,omitempty"`
}

var actions = map[string]lb.Action{
	"enable":         lb.ActionEnable,
	"disable":        lb.ActionDisable,
	"forced-offline": lb.ActionForcedOffline,
	"drain":          lb.ActionDrain,
}

// statuses are the JSON answer's HTTP status for a request's result;
// another result (failed) is 502.
var statuses = map[lb.Result]int{
	lb.ResultOK:         http.StatusOK,
	lb.ResultRunning:    http.StatusAccepted,
	lb.ResultInvalid:    http.StatusBadRequest,
	lb.ResultRefused:    http.StatusForbidden,
	lb.ResultLocked:     http.StatusConflict,
	lb.ResultNotDrained: http.StatusPreconditionFailed,
	lb.ResultCanceled:   http.StatusServiceUnavailable,
}

// statusOf maps a request's result to the JSON answer's HTTP status.
func statusOf(res lb.Result) int {
	if code, ok := statuses[res]; ok {
		return code
	}
	return http.StatusBadGateway
}

type doneRun struct {
	out *lb.Outcome
	err error
}

// control runs a control request: the Controller checks the permission,
// takes the lock and audits it, on a goroutine of the Console's, so that
// a drain goes on after the answer. The answer waits until a drain has
// started (lock held, audit entry written) and until any other request
// has ended, or, when asked to wait, until the drain ends; a refusal
// ends a request at once.
func (c *Console) control(w http.ResponseWriter, r *http.Request) {
	g, name := r.PathValue("group"), r.PathValue("action")
	action, ok := actions[name]
	if !ok {
		c.fail(w, r, http.StatusNotFound, "no action "+strconv.Quote(name)+" (enable, disable, forced-offline, drain)")
		return
	}
	if _, ok := c.cfg.Groups[g]; !ok {
		c.fail(w, r, http.StatusNotFound, "no group "+strconv.Quote(g))
		return
	}
	op, why := c.operator(r)
	if op == "" {
		c.fail(w, r, http.StatusForbidden, why)
		return
	}
	var body controlBody
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			c.fail(w, r, http.StatusBadRequest, "the body must be {\"nodes\": [...], \"wait\": bool}")
			return
		}
	} else {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusBadRequest, "bad form")
			return
		}
		body.Nodes = r.PostForm["node"]
		body.Wait = r.URL.Query().Get("wait") == "1"
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.fail(w, r, http.StatusServiceUnavailable, "the console is shutting down")
		return
	}
	c.wg.Add(1)
	c.controls++
	c.mu.Unlock()
	ctrl, err := c.cfg.NewController()
	if err != nil {
		c.endControl()
		c.fail(w, r, http.StatusInternalServerError, "cannot build the controller: "+err.Error())
		return
	}
	started := make(chan lb.Entry, 1)
	done := make(chan doneRun, 1)
	req := lb.Request{Operator: op, OperatorVia: c.operatorVia(r), Action: action, Group: g, Nodes: body.Nodes, OnStart: func(e lb.Entry) { started <- e }}
	go func() {
		defer c.endControl()
		out, err := ctrl.Do(c.ctx, req)
		done <- doneRun{out, err}
		c.kickPoll()
	}()
	c.kickPoll() // show "Disabling" soon

	wait := c.cfg.ControlWait
	if body.Wait {
		wait = MaxWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var (
		entry lb.Entry
		run   *doneRun
	)
	select {
	case entry = <-started:
		// A drain goes on after the answer; the other actions are a few
		// calls, waited for (within the bound).
		if body.Wait || action != lb.ActionDrain {
			select {
			case d := <-done:
				run = &d
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		} else {
			select { // a quick change may be over already
			case d := <-done:
				run = &d
			default:
			}
		}
	case d := <-done:
		run = &d
	case <-t.C:
		c.fail(w, r, http.StatusGatewayTimeout, "the request did not start within "+wait.String()+" (it may still run: see the audit trail)")
		return
	case <-r.Context().Done():
		return
	}
	res := lb.ResultRunning
	var errText string
	var holder *holderView
	if run != nil {
		entry = run.out.Entry
		res = entry.Result
		if run.err != nil {
			errText = run.err.Error()
		}
		if le, ok := errors.AsType[*lb.LockedError](run.err); ok {
			holder = holderOf(le.Holder)
		}
	}
	if wantsJSON(r) {
		ans := controlAnswer{AuditID: entry.ID, Result: string(res), Error: errText, Holder: holder}
		if entry.ID != 0 {
			ans.Location = "/audit/" + strconv.FormatInt(entry.ID, 10)
			ev := entryOf(entry, nil)
			ans.Entry = &ev
		}
		writeJSON(w, statusOf(res), ans)
		return
	}
	if entry.ID == 0 { // not even audited: say why here
		c.fail(w, r, statusOf(res), errText)
		return
	}
	// Post/redirect/get: the group's page shows the request from the
	// audit trail (?audit=N), so a reload does not post again.
	http.Redirect(w, r, "/groups/"+url.PathEscape(g)+"?audit="+strconv.FormatInt(entry.ID, 10), http.StatusSeeOther)
}

func (c *Console) endControl() {
	c.mu.Lock()
	c.controls--
	c.mu.Unlock()
	c.wg.Done()
}

// view builds the page of groups from the last poll and the store.
func (c *Console) view(ctx context.Context, r *http.Request, groups []string, rows int) pageView {
	op, why := c.operator(r)
	snap := c.snapshotFor(ctx)
	v := pageView{Title: c.cfg.Title, Operator: op, ReadOnly: why, PolledAt: snap.at, Now: time.Now(), RefreshMS: c.cfg.Refresh.Milliseconds()}
	holders, err := c.cfg.Store.Holders(ctx)
	var errs []string
	if err != nil {
		errs = append(errs, "lock holders: "+err.Error())
	}
	for _, g := range groups {
		gv := groupView{Name: g, MayControl: op != "" && c.cfg.Permissions.Check(op, g) == nil}
		if h, ok := holders[g]; ok {
			gv.Holder = holderOf(h)
		}
		gr, read := snap.groups[g]
		gv.ReadAt = gr.at
		switch {
		case !read:
			gv.Error = "not read yet"
			for _, t := range c.cfg.Groups[g] {
				gv.Members = append(gv.Members, memberView{Balancer: t.Balancer, Member: t.Member.String(), Node: t.Node, Phase: string(lb.PhaseUnknown), Admin: lb.StateUnknown.String()})
			}
		case gr.status != nil:
			for _, m := range gr.status.Members {
				gv.Members = append(gv.Members, memberOf(m))
			}
			if gr.err != nil {
				gv.Error = gr.err.Error()
			}
		default:
			gv.Error = gr.err.Error()
		}
		seen := map[string]bool{}
		for _, m := range gv.Members {
			gv.Counts.add(m.Phase)
			v.Totals.add(m.Phase)
			if !seen[m.Node] {
				seen[m.Node] = true
				gv.Nodes = append(gv.Nodes, m.Node)
			}
		}
		gv.Phase = gv.Counts.overall()
		entries, err := c.cfg.Store.Entries(ctx, g, rows)
		if err != nil {
			errs = append(errs, "audit of "+g+": "+err.Error())
		}
		for _, e := range entries {
			ev := entryOf(e, holders)
			if ev.State == "running" && gv.Running == nil {
				gv.Running = &ev
			}
			gv.Audit = append(gv.Audit, ev)
		}
		v.Groups = append(v.Groups, gv)
	}
	if id, err := strconv.ParseInt(r.URL.Query().Get("audit"), 10, 64); err == nil && id > 0 {
		if e, err := c.cfg.Store.Entry(ctx, id); err == nil && e != nil {
			ev := entryOf(*e, holders)
			v.Request = &ev
		}
	}
	v.Error = strings.Join(errs, "; ")
	return v
}
