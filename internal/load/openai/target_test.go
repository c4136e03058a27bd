package openai

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRedacted: neither String nor %#v nor %v shows the API key or a
// header's value.
func TestRedacted(t *testing.T) {
	tg := Target{BaseURL: "http://user:pw@h:8000/v1?k=q", Model: "m", APIKey: "sk-secretsecret",
		Headers: http.Header{"X-Token": {"hdr-secret"}}}
	for _, s := range []string{tg.String(), fmt.Sprintf("%v", tg), fmt.Sprintf("%+v", tg), fmt.Sprintf("%#v", tg), fmt.Sprint(tg)} {
		for _, secret := range []string{"sk-secretsecret", "hdr-secret", "pw", "k=q"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q shows %q", s, secret)
			}
		}
	}
	if got := tg.Scrub("echo sk-secretsecret and hdr-secret"); strings.Contains(got, "secret") {
		t.Errorf("Scrub left %q", got)
	}
	chat := Target{BaseURL: "http://h:8000/v1/", Endpoint: EndpointChat}
	if got := chat.URL(chat.Path()); got != "http://h:8000/v1/chat/completions" {
		t.Errorf("chat URL %s", got)
	}
}

// TestValidate: what a target cannot be.
func TestValidate(t *testing.T) {
	for _, tg := range []Target{
		{BaseURL: "ftp://h", Model: "m"}, {BaseURL: "http://", Model: "m"}, {BaseURL: "http://h:0", Model: "m"},
		{BaseURL: "http://h"}, {BaseURL: "http://h", Model: "m", Endpoint: "embeddings"},
	} {
		if tg.Validate() == nil {
			t.Errorf("%#v validates", tg)
		}
	}
	if err := (Target{BaseURL: "http://h:8000/v1", Model: "m", Endpoint: EndpointChat}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestOneTarget: Target is the one type in the tree that holds a server's
// base URL beside an API key; the benchmark and the quality gate both use
// it.
func TestOneTarget(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file)))) // the module root, above internal/load/openai
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if filepath.Dir(rel) == filepath.Join("internal", "load", "openai") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			var url, key bool
			for _, fl := range st.Fields.List {
				for _, name := range fl.Names {
					l := strings.ToLower(name.Name)
					url = url || strings.Contains(l, "baseurl")
					key = key || l == "apikey"
				}
			}
			if url && key {
				t.Errorf("%s: a struct holds a base URL and an API key; use openai.Target", rel)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
