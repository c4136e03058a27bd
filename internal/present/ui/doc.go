// Package ui is servetune's live dashboard: a read-only web page over a
// study database, served by servetune itself with net/http and Go
// templates, and updated by server-sent events. It has no JavaScript
// framework, no build step and no external asset: one inline script of a
// dozen lines swaps the HTML fragments the server sends.
//
//	srv := &ui.Server{DB: db, Tool: "servetune dev"}
//	http.ListenAndServe("127.0.0.1:8080", srv.Handler())
//
// Pages: / lists the studies; /study/NAME shows one (trials as they start
// and finish, best so far, ETA, the Pareto chart, failures with their
// messages) and waits for a study that has not started yet;
// /study/NAME/report is the full report. The server polls the database,
// so `servetune ui` shows a study another process is running; a Live fed
// by the running study (`tune --ui`) adds each trial's load-level
// progress. Each page is rendered once per change for all its open
// copies (a hub polls store.Changes and fans the encoded events out), so
// clients cost the run they watch almost nothing; open streams and
// connections are capped (503 past the cap) and every connection has
// read-header, write and idle timeouts. Only GET and HEAD are served: the page never starts or stops
// anything. On a loopback address, requests naming another host are
// refused (DNS rebinding).
//
// A Server is safe for concurrent use.
package ui
