package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndpointCredentials: an endpoint whose base_url holds a password,
// and extra_args written as a block list holding keys after --api-key, -k,
// --auth and --middleware auth=, keep none of them in the database, the
// trials, the HTML and Markdown reports, or what the commands print; the
// metrics scrape that the server refuses says why with the password
// redacted.
func TestEndpointCredentials(t *testing.T) {
	stream := &streamServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/metrics":
			http.Error(w, "who are you", http.StatusUnauthorized)
		default:
			stream.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	base := strings.Replace(srv.URL, "http://", "http://admin:pw-s3cr3t-url@", 1)
	src := strings.Replace(vspec(8, 1), "launcher: {kind: virtual, gpus: [0, 1]}", "launcher: {kind: endpoint, base_url: \""+base+"\"}", 1)
	src = strings.Replace(src, "max_running_requests: [8, 32, 128]", "max_running_requests: 8\n  extra_args:\n    - --api-key\n    - tok-block-s3cr3t\n    - -k\n    - tok-k-s3cr3t\n    - --auth\n    - tok-auth-s3cr3t\n    - --middleware\n    - auth=tok-mw-s3cr3t", 1)
	src = strings.Replace(src, "gpu_memory_fraction: [0.85, 0.9]", "gpu_memory_fraction: 0.9", 1)
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	var all strings.Builder
	code, out, errs := runIn("tune", writeSpec(t, src), "--db", db)
	all.WriteString(out + errs)
	if code != exitOK {
		t.Fatalf("tune: exit %d\n%s%s", code, out, errs)
	}
	html, md := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.md")
	for _, args := range [][]string{{"trials", "vstudy", "--json", "-"}, {"trials", "vstudy"}, {"recommend", "vstudy"},
		{"report", "vstudy", "-o", html}, {"report", "vstudy", "-o", md}} {
		_, o, e := runIn(append(args, "--db", db)...)
		all.WriteString(o + e)
	}
	files, _ := filepath.Glob(db + "*")
	for _, f := range append(files, html, md) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, s := range []string{"pw-s3cr3t-url", "tok-block-s3cr3t", "tok-k-s3cr3t", "tok-auth-s3cr3t", "tok-mw-s3cr3t"} {
		if strings.Contains(all.String(), s) {
			t.Errorf("%s is in the database, a report or the output", s)
		}
	}
	if !strings.Contains(all.String(), "admin:[REDACTED]@127.0.0.1") {
		t.Errorf("the URL is not shown redacted anywhere")
	}
}
