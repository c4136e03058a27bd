// Package browser drives headless Chromium (through the Chrome DevTools
// Protocol, github.com/chromedp/chromedp) for the tests that look at what
// servetune shows a person: the study report and the live dashboard.
//
// Tests skip with a clear message on a machine without Chromium, and fail
// instead where SERVETUNE_REQUIRE_CHROMIUM=1 (CI, whose .ci/run installs
// Debian's chromium). SERVETUNE_CHROMIUM names the binary when it is not
// on PATH as chromium, chromium-browser or google-chrome.
//
// A Page is used by one test goroutine; its record of console messages
// and requests is safe to read while the page runs.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path returns the Chromium binary, or "" when there is none.
func Path() string {
	if p := os.Getenv("SERVETUNE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Page is one browser tab with what it logged and requested.
type Page struct {
	Ctx context.Context // a chromedp context: chromedp.Run(p.Ctx, ...)

	mu       sync.Mutex
	console  []string // errors and warnings: console.error, exceptions, browser log errors
	requests []string // every URL the page asked for
}

// New starts headless Chromium with a width×height window and opens a
// blank tab; the browser stops when the test ends. It skips the test
// without Chromium (fails under SERVETUNE_REQUIRE_CHROMIUM=1).
func New(t testing.TB, width, height int) *Page {
	t.Helper()
	path := Path()
	if path == "" {
		if os.Getenv("SERVETUNE_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("browser: no chromium on PATH (SERVETUNE_REQUIRE_CHROMIUM=1; apt-get install chromium)")
		}
		t.Skip("browser: no chromium on PATH (apt-get install chromium); set SERVETUNE_REQUIRE_CHROMIUM=1 to fail instead")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-device-scale-factor", "1"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	p := &Page{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(p.listen))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p.Ctx = ctx
	// Start the browser now, on a context without a deadline (a deadline
	// on the first Run would stop the browser with it).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		if os.Getenv("SERVETUNE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("browser: start %s: %v", path, err)
		}
		t.Skipf("browser: start %s: %v", path, err)
	}
	return p
}

func (p *Page) listen(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			p.console = append(p.console, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		p.console = append(p.console, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *log.EventEntryAdded:
		// The browser's own errors: a blocked load (CSP), a failed request.
		if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
			p.console = append(p.console, fmt.Sprintf("log %s %s: %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, e.Request.URL)
	}
}

// Console returns the errors and warnings the page logged so far.
func (p *Page) Console() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// Requests returns every URL the page requested so far, the page itself
// included.
func (p *Page) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}
