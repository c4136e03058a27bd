package bench

import (
	"bytes"
	"fmt"
)

// chunkInfo is what the client needs from one streamed JSON chunk.
type chunkInfo struct {
	textBytes        int    // bytes of text/content/reasoning deltas (escaped form)
	answer           []byte // the text or content delta, escaped JSON (aliases the input); reasoning excluded
	finished         bool   // a choice carried a non-null finish_reason
	hasUsage         bool
	choices          int // choice objects in the chunk
	promptTokens     int
	completionTokens int
	isError          bool
	errMsg           []byte // raw JSON of the error value (aliases the input)
	engineUS         int    // servetune_engine_us: the simulated engine's own clock; -1 when absent
	lagUS            int    // servetune_lag_us: how late the simulated engine wrote the chunk
}

// parseChunk extracts chunkInfo from a completions or chat-completions
// stream chunk. It is a small purpose-built JSON scanner instead of
// encoding/json so that the hot path allocates nothing per event; it
// validates the structure it walks and rejects malformed JSON.
func parseChunk(data []byte) (chunkInfo, error) {
	s := jscan{b: data}
	ci := chunkInfo{engineUS: -1}
	s.ws()
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "servetune_engine_us":
			return s.intTo(&ci.engineUS)
		case "servetune_lag_us":
			return s.intTo(&ci.lagUS)
		case "choices":
			if s.peek() != '[' {
				return s.skip()
			}
			return s.array(func() error {
				if s.peek() != '{' {
					return s.skip()
				}
				ci.choices++
				return s.object(func(k []byte) error { return ci.choiceField(&s, k) })
			})
		case "usage":
			if s.peek() != '{' {
				return s.skip()
			}
			ci.hasUsage = true
			return s.object(func(k []byte) error {
				switch string(k) {
				case "prompt_tokens":
					return s.intTo(&ci.promptTokens)
				case "completion_tokens":
					return s.intTo(&ci.completionTokens)
				}
				return s.skip()
			})
		case "error":
			start := s.i
			if s.isNull() {
				return s.skip()
			}
			if err := s.skip(); err != nil {
				return err
			}
			ci.isError, ci.errMsg = true, s.b[start:s.i]
			return nil
		case "object":
			if s.peek() == '"' {
				v, err := s.str()
				if string(v) == "error" {
					ci.isError = true
				}
				return err
			}
		}
		return s.skip()
	})
	if err != nil {
		return ci, err
	}
	s.ws()
	if s.i != len(s.b) {
		return ci, s.errf("trailing data")
	}
	return ci, nil
}

// choiceField handles one key of a choice object.
func (ci *chunkInfo) choiceField(s *jscan, key []byte) error {
	switch string(key) {
	case "text":
		return ci.answerValue(s)
	case "finish_reason":
		if s.isNull() {
			return s.skip()
		}
		ci.finished = true
		return s.skip()
	case "delta":
		if s.peek() != '{' {
			return s.skip()
		}
		return s.object(func(k []byte) error {
			switch string(k) {
			case "content":
				return ci.answerValue(s)
			case "reasoning_content", "reasoning":
				return ci.textValue(s)
			}
			return s.skip()
		})
	}
	return s.skip()
}

func (ci *chunkInfo) textValue(s *jscan) error {
	if s.peek() != '"' {
		return s.skip()
	}
	v, err := s.str()
	ci.textBytes += len(v)
	return err
}

// answerValue is textValue for the answer's own text, which a
// conversation puts in the next turn's history.
func (ci *chunkInfo) answerValue(s *jscan) error {
	if s.peek() != '"' {
		return s.skip()
	}
	v, err := s.str()
	ci.textBytes += len(v)
	ci.answer = v // aliases the chunk, as errMsg does: no copy on the hot path
	return err
}

// jscan walks JSON text.
type jscan struct {
	b     []byte
	i     int
	depth int
}

const maxJSONDepth = 64

func (s *jscan) errf(msg string) error {
	return fmt.Errorf("%w: chunk JSON: %s at byte %d", ErrBadSSE, msg, s.i)
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jscan) isNull() bool {
	return s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null"))
}

// object walks {"k": v, ...}, calling field with each key positioned at its
// value; field must consume the value.
func (s *jscan) object(field func(key []byte) error) error {
	return s.members('{', '}', "object", func() error {
		if s.peek() != '"' {
			return s.errf("want key")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.errf("want ':'")
		}
		s.i++
		s.ws()
		return field(key)
	})
}

// array walks [v, ...], calling elem positioned at each value.
func (s *jscan) array(elem func() error) error {
	return s.members('[', ']', "array", func() error {
		s.ws()
		return elem()
	})
}

// members walks a container, what, from open to end, calling member for
// each of its comma-separated members; member must consume it. Nesting
// is bounded by maxJSONDepth.
func (s *jscan) members(open, end byte, what string, member func() error) error {
	if s.peek() != open {
		return s.errf("want " + what)
	}
	if s.depth++; s.depth > maxJSONDepth {
		return s.errf("too deep")
	}
	s.i++
	if s.peek() == end {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := member(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case end:
			s.i++
			s.depth--
			return nil
		default:
			return s.errf("want ',' or '" + string(end) + "'")
		}
	}
}

// str consumes a string and returns its raw (still escaped) contents.
func (s *jscan) str() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errf("want string")
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, nil
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return nil, s.errf("unterminated escape")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(s.b) {
					return nil, s.errf("short \\u escape")
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, s.errf("bad \\u escape")
					}
				}
				s.i += 5
			default:
				return nil, s.errf("bad escape")
			}
		case c < 0x20:
			return nil, s.errf("control character in string")
		default:
			s.i++
		}
	}
	return nil, s.errf("unterminated string")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// intTo consumes a JSON number into *v (int).
func (s *jscan) intTo(v *int) error {
	n, err := s.int()
	*v = n
	return err
}

// int consumes a JSON number and returns its integer part (token counts are
// integers; a fraction or exponent is accepted and truncated).
func (s *jscan) int() (int, error) {
	if s.isNull() {
		return 0, s.skip()
	}
	start := s.i
	if err := s.number(); err != nil {
		return 0, err
	}
	n, neg := 0, false
	for _, c := range s.b[start:s.i] {
		switch {
		case c == '-':
			neg = true
		case '0' <= c && c <= '9':
			if n < 1<<40 {
				n = n*10 + int(c-'0')
			}
		default:
			if neg {
				n = -n
			}
			return n, nil
		}
	}
	if neg {
		n = -n
	}
	return n, nil
}

func (s *jscan) number() error {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		k := s.i
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i - k
	}
	lead := s.i
	if n := digits(); n == 0 {
		s.i = start
		return s.errf("want number")
	} else if n > 1 && s.b[lead] == '0' {
		return s.errf("leading zero")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.errf("bad fraction")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.errf("bad exponent")
		}
	}
	return nil
}

// skip consumes any value.
func (s *jscan) skip() error {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return s.errf("want value")
}

func (s *jscan) lit(w string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return s.errf("bad literal")
	}
	s.i += len(w)
	return nil
}
