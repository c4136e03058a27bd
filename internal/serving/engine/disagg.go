package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// KV roles of vLLM's --kv-transfer-config (kv_role).
const (
	KVProducer = "kv_producer" // a prefill engine
	KVConsumer = "kv_consumer" // a decode engine
	KVBoth     = "kv_both"     // either, as each request's kv_transfer_params says
)

// KVTransferConfig is the part of vLLM's --kv-transfer-config servetune
// reads: the connector (NixlConnector, LMCacheConnectorV1, ...) and this
// engine's role.
type KVTransferConfig struct {
	Connector string `json:"kv_connector"`
	Role      string `json:"kv_role"`
}

// ParseKVTransferConfig reads --kv-transfer-config's JSON; the error
// names the problem in one line.
func ParseKVTransferConfig(val string) (KVTransferConfig, error) {
	var c KVTransferConfig
	if err := json.Unmarshal([]byte(val), &c); err != nil {
		return c, fmt.Errorf("invalid JSON object: %v", err)
	}
	if c.Connector == "" {
		return c, errors.New("kv_connector: field required (e.g. NixlConnector)")
	}
	roles := []string{KVProducer, KVConsumer, KVBoth}
	if !slices.Contains(roles, c.Role) {
		return c, fmt.Errorf("kv_role %q: want one of %v", c.Role, roles)
	}
	return c, nil
}

func readKVTransferConfig(val string, s Settings) error {
	if _, err := ParseKVTransferConfig(val); err != nil {
		return err
	}
	s["kv_transfer_config"] = val
	return nil
}

// DisaggregationModes are SGLang's --disaggregation-mode values ("null":
// an aggregated server).
var DisaggregationModes = []string{"null", "prefill", "decode"}

func readDisaggregationMode(val string, s Settings) error {
	if !slices.Contains(DisaggregationModes, val) {
		return fmt.Errorf("invalid choice: %q (choose from %v)", val, DisaggregationModes)
	}
	s["disaggregation_mode"] = val
	return nil
}
