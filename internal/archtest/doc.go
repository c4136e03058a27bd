// Package archtest holds no code, only the test that keeps
// docs/architecture.md true: every claim of it that is a rule about the
// code is a row of one table (rules, in rules_test.go), and TestRules
// checks each row as a subtest against the module as it is (every Go file
// parsed, tests included, and go list's graph), then against the row's
// deliberate violations, which it must catch. A broken rule names the
// file, the line and the import or identifier that broke it. The Rules
// section of docs/architecture.md names every row, and only rows.
package archtest
