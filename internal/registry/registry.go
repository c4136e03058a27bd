// Package registry is the one table of named kinds that packages fill in
// their init functions (launcher kinds, sampler kinds): safe for
// concurrent use, a name registered once.
//
//	var kinds = registry.New[Kind]("launcher")
//	func Register(k Kind) { kinds.Add(k.Name, k, k.Decode != nil) }
package registry

import (
	"fmt"
	"slices"
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
