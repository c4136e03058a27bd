package measure

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestConversationRoundTrips: a summary's conversation object is written
// under "conversation" and read back whole (the store keeps a load
// point's summary as this JSON), and a summary without one has no key.
func TestConversationRoundTrips(t *testing.T) {
	hit := 0.25
	s := Summary{Completed: 8, Conversation: &Conversation{Sessions: 2, SessionsCompleted: 2, NewInputTokens: 256,
		ReusedInputTokens: 900, ReusedShare: 900.0 / 1156, MedianSessionMS: 4100, PrefixCacheHitRate: &hit,
		Turns: []Turn{{Turn: 1, Sent: 2, Completed: 2, MeanInputTokens: 64, MedianTTFTMS: 12.5}, {Turn: 2, Sent: 2, Completed: 2, MeanReusedTokens: 264}}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Conversation, s.Conversation) {
		t.Errorf("read back %+v, want %+v", back.Conversation, s.Conversation)
	}
	b, _ = json.Marshal(Summary{Completed: 1})
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["conversation"]; ok {
		t.Errorf("a single-turn summary has a conversation key")
	}
}
