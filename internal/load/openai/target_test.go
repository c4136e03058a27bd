package openai

import (
	"fmt"
	"net/http"
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
