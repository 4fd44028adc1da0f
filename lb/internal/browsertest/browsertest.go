// Package browsertest starts headless Chromium for the lb module's
// end-to-end tests, through chromedp.
//
// [New] finds the browser ($HOLDFAST_CHROMIUM, else chromium,
// chromium-browser, google-chrome or headless-shell on PATH; Debian's
// package is chromium) and starts it headless with a fresh profile
// directory and the flags that keep it off the network: no background
// networking, component updates, sync or QUIC. Without a browser the test
// is skipped, or failed when HOLDFAST_REQUIRE_BROWSER=1, as in CI. The
// browser is closed, and its process waited for, when the test ends.
//
// [Tab] opens a tab, optionally with extra request headers (an
// authenticating proxy's user header); [AcceptDialogs] answers the
// tab's confirm dialogs with OK and records their messages.
package browsertest

import (
	"context"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/holdfast-db/holdfast/lb/internal/testbin"
)

// EnvRequire names the variable that, set to "1", fails rather than skips
// a test when no browser is installed.
const EnvRequire = "HOLDFAST_REQUIRE_BROWSER"

// EnvPath names the variable that, when set, is the browser's path.
const EnvPath = "HOLDFAST_CHROMIUM"

// Path returns the browser's path, or "".
func Path() string {
	return testbin.Find(EnvPath, "chromium", "chromium-browser", "google-chrome", "headless-shell")
}

// New starts a headless browser whose windows are width × height pixels
// and returns the context of its first tab.
func New(t testing.TB, width, height int) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		testbin.Missing(t, EnvRequire, "browsertest: no Chromium (install the Debian package chromium, or set "+EnvPath+")")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel() // waits for the browser process
	})
	if err := chromedp.Do(ctx); err != nil { // start it now, so that a broken browser fails here
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	return context.WithValue(ctx, sizeKey{}, [2]int64{int64(width), int64(height)})
}

// sizeKey keys, in the browser's context, its windows' size: each Tab
// sets its viewport to it.
type sizeKey struct{}

// Tab opens a new tab of the browser whose requests carry headers (none
// when nil). It is closed when the test ends.
func Tab(t testing.TB, browser context.Context, headers map[string]string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	if size, ok := browser.Value(sizeKey{}).([2]int64); ok {
		// A tab opened beside another may be laid out 0 pixels wide
		// until it is shown (a screenshot of it then fails: CI saw
		// "Cannot take screenshot with 0 width"): its viewport is set.
		if _, err := chromedp.Run(ctx, chromedp.EmulateViewport(size[0], size[1])); err != nil {
			t.Fatalf("browsertest: sizing a tab: %v", err)
		}
	}
	if len(headers) > 0 {
		h := network.Headers{}
		for k, v := range headers {
			h[k] = v
		}
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}

// Dialogs records the messages of the dialogs [AcceptDialogs] answered.
type Dialogs struct {
	mu   sync.Mutex
	msgs []string
}

// Messages returns the messages so far.
func (d *Dialogs) Messages() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.msgs...)
}

// AcceptDialogs answers OK to every dialog the tab opens (a dialog blocks
// the page, and the click that opened it, until it is answered), on a
// goroutine that ends, and is waited for, when the test ends.
func AcceptDialogs(t testing.TB, tab context.Context) *Dialogs {
	t.Helper()
	d := &Dialogs{}
	lctx, stop := context.WithCancel(tab)
	events := chromedp.Events(lctx, page.JavascriptDialogOpening)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev, err := range events {
			if err != nil {
				return
			}
			d.mu.Lock()
			d.msgs = append(d.msgs, ev.Message)
			d.mu.Unlock()
			if _, err := chromedp.Call(tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	return d
}
