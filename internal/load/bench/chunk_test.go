package bench

import (
	"encoding/json"
	"testing"
)

func TestParseChunk(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    chunkInfo
		wantErr bool
	}{
		{"completion text", `{"choices":[{"index":0,"text":" the","finish_reason":null}]}`, chunkInfo{textBytes: 4}, false},
		{"chat delta", `{"choices":[{"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`, chunkInfo{textBytes: 2}, false},
		{"chat role only", `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, chunkInfo{}, false},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, chunkInfo{textBytes: 3}, false},
		{"finish", `{"choices":[{"text":"","finish_reason":"length"}]}`, chunkInfo{finished: true}, false},
		{"usage", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}`,
			chunkInfo{hasUsage: true, promptTokens: 12, completionTokens: 34}, false},
		{"null usage", `{"choices":[{"text":"a"}],"usage":null}`, chunkInfo{textBytes: 1}, false},
		{"escapes", `{"choices":[{"text":"\"\u00e9\n"}]}`, chunkInfo{textBytes: 10}, false},
		{"error object", `{"error":{"message":"boom"}}`, chunkInfo{isError: true, errMsg: []byte(`{"message":"boom"}`)}, false},
		{"object error", `{"object":"error","message":"boom"}`, chunkInfo{isError: true}, false},
		{"null error", `{"error":null,"choices":[]}`, chunkInfo{}, false},
		{"whitespace", " { \"choices\" : [ { \"text\" : \"x\" } ] } ", chunkInfo{textBytes: 1}, false},
		{"not json", `[DONE`, chunkInfo{}, true},
		{"trailing", `{"choices":[]} x`, chunkInfo{}, true},
		{"unterminated", `{"choices":[{"text":"abc`, chunkInfo{}, true},
		{"bad number", `{"usage":{"completion_tokens":1.}}`, chunkInfo{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseChunk([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got.textBytes != tc.want.textBytes || got.finished != tc.want.finished || got.hasUsage != tc.want.hasUsage ||
				got.promptTokens != tc.want.promptTokens || got.completionTokens != tc.want.completionTokens ||
				got.isError != tc.want.isError || (tc.want.errMsg != nil && string(got.errMsg) != string(tc.want.errMsg)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseChunk checks the scanner against encoding/json: it must accept
// exactly the valid JSON objects and agree on the fields it extracts.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"text":"a","finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}`, `{"error":{"message":"m"}}`,
		`{}`, `[]`, `{"a":[1,2.5e3,true,false,null,"\u0041"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := parseChunk(in)
		var ref struct {
			Choices []struct {
				Text         *string         `json:"text"`
				FinishReason json.RawMessage `json:"finish_reason"`
			} `json:"choices"`
		}
		var obj map[string]json.RawMessage
		valid := json.Valid(in) && json.Unmarshal(in, &obj) == nil
		if !valid {
			if err == nil {
				t.Fatalf("accepted invalid JSON object %q", in)
			}
			return
		}
		if err != nil {
			// Valid JSON whose known fields have other types is fine to
			// reject only if the scanner saw a structural problem; ours
			// skips unexpected types, so any error here is a bug.
			t.Fatalf("rejected valid JSON %q: %v", in, err)
		}
		if json.Unmarshal(in, &ref) == nil {
			finished := false
			for _, c := range ref.Choices {
				if len(c.FinishReason) > 0 && string(c.FinishReason) != "null" {
					finished = true
				}
			}
			if finished != got.finished {
				t.Fatalf("%q: finished %v, want %v", in, got.finished, finished)
			}
		}
	})
}
