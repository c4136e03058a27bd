package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Sampling is a request's sampling parameters as the engine applies them:
// Temperature 0 is greedy, TopP 0 or 1 and TopK 0 are off.
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p,omitempty"`
	TopK        int     `json:"top_k,omitempty"`
}

// Filters says whether the sampling keeps only the top-p or top-k tokens
// (a random draw with a filter: what vLLM's native sampler sorts the
// vocabulary for).
func (s Sampling) Filters() bool {
	return s.Temperature > 0 && ((s.TopP > 0 && s.TopP < 1) || s.TopK > 0)
}

// Sampling defaults of the models' published generation_config.json
// files, which vLLM's OpenAI server applies to a request that does not
// set them (--generation-config auto, the default since vLLM PR #12622,
// v0.8.0): Meta's Llama 3.1 and 3.3 Instruct files set temperature 0.6
// and top_p 0.9 (huggingface.co/meta-llama/Llama-3.1-8B-Instruct,
// generation_config.json), Qwen3's temperature 0.6, top_k 20, top_p 0.95
// (huggingface.co/Qwen/Qwen3-32B, generation_config.json).
var (
	llama3Generation = &Sampling{Temperature: 0.6, TopP: 0.9}
	qwen3Generation  = &Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20}
)

// generationConfigPath is the generation_config.json beside a config.json:
// dir/generation_config.json for dir/config.json, NAME.generation_config.json
// for NAME.config.json; "" for any other name.
func generationConfigPath(configPath string) string {
	if !strings.HasSuffix(configPath, "config.json") {
		return ""
	}
	return strings.TrimSuffix(configPath, "config.json") + "generation_config.json"
}

// loadGeneration reads the sampling defaults of the generation_config.json
// beside configPath; nil when there is none or it sets no sampling field.
func loadGeneration(configPath string) (*Sampling, error) {
	p := generationConfigPath(configPath)
	if p == "" {
		return nil, nil
	}
	return LoadGenerationConfig(p)
}

// LoadGenerationConfig reads a generation_config.json's sampling
// defaults (ParseGenerationConfig); nil, and no error, when the file does
// not exist.
func LoadGenerationConfig(p string) (*Sampling, error) {
	f, err := os.Open(p)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("generation config: %w", err)
	}
	defer f.Close()
	return ParseGenerationConfig(io.LimitReader(f, maxConfigBytes))
}

// ParseGenerationConfig reads a Hugging Face generation_config.json's
// sampling fields; nil when it sets none of temperature, top_p and top_k.
// A sampling field left out takes the OpenAI API's default (temperature
// 1, no filter), as vLLM's server does.
func ParseGenerationConfig(r io.Reader) (*Sampling, error) {
	var g struct {
		Temperature *float64 `json:"temperature"`
		TopP        *float64 `json:"top_p"`
		TopK        *int     `json:"top_k"`
	}
	if err := json.NewDecoder(r).Decode(&g); err != nil {
		return nil, fmt.Errorf("generation config: %w", err)
	}
	if g.Temperature == nil && g.TopP == nil && g.TopK == nil {
		return nil, nil
	}
	s := &Sampling{Temperature: 1}
	if g.Temperature != nil {
		s.Temperature = *g.Temperature
	}
	if g.TopP != nil {
		s.TopP = *g.TopP
	}
	if g.TopK != nil {
		s.TopK = *g.TopK
	}
	return s, nil
}
