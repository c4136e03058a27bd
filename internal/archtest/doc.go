// Package archtest holds no code, only tests that keep docs/architecture.md
// true: its package table lists every package of the module, in an order
// where each package imports only those below it; its other claims about
// what imports what hold (one table of rules, rules_test.go); launchers'
// capabilities are read from one value, never asserted by type; and every
// code comment that points at a section of a document under docs/ names a
// heading that exists.
package archtest
