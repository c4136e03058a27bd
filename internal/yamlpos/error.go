package yamlpos

import "fmt"

// Error is a problem in a spec file at a position. It prints as
// "file:line: field: problem".
type Error struct {
	File   string
	Line   int
	Column int
	Field  string // dotted path of the offending key, e.g. "space.tensor_parallel"
	Err    error
}

func (e *Error) Error() string {
	pos := e.File
	if pos == "" {
		pos = "spec"
	}
	if e.Line > 0 {
		pos = fmt.Sprintf("%s:%d", pos, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", pos, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", pos, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
