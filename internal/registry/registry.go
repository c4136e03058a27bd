// Package registry is the one table of named kinds that packages fill in
// their init functions (launcher kinds, sampler kinds): safe for
// concurrent use, a name registered once. Parse and Strings read and name
// a fixed list of string-valued names (trace formats, scaling signals).
//
//	var kinds = registry.New[Kind]("launcher")
//	func Register(k Kind) { kinds.Add(k.Name, k, k.Decode != nil) }
package registry

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry maps names to values of one kind.
type Registry[T any] struct {
	what string
	mu   sync.RWMutex
	m    map[string]T
}

// New is an empty registry; what names its kinds in Add's panic.
func New[T any](what string) *Registry[T] {
	return &Registry[T]{what: what, m: map[string]T{}}
}

// Add registers v under name. An empty or taken name, or a value its
// caller found incomplete (!valid), panics: registration runs in init,
// where a mistake is the program's.
func (r *Registry[T]) Add(name string, v T, valid bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup || name == "" || !valid {
		panic(fmt.Sprintf("%s: bad or duplicate kind %q", r.what, name))
	}
	r.m[name] = v
}

// Lookup is the value registered under name.
func (r *Registry[T]) Lookup(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names are the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for name := range r.m {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// All are the registered values in the order of their names.
func (r *Registry[T]) All() []T {
	names := r.Names()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]T, len(names))
	for i, name := range names {
		out[i] = r.m[name]
	}
	return out
}

// Parse returns the value of known spelled s, or an error naming what is
// read and every known value.
func Parse[T ~string](what, s string, known []T) (T, error) {
	if i := slices.Index(known, T(s)); i >= 0 {
		return known[i], nil
	}
	var zero T
	return zero, fmt.Errorf("unknown %s %q (known: %s)", what, s, strings.Join(Strings(known), ", "))
}

// Strings are known's values as strings, in their order.
func Strings[T ~string](known []T) []string {
	out := make([]string, len(known))
	for i, v := range known {
		out[i] = string(v)
	}
	return out
}
