package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// Every command servetune prints is for one release of its engine: flags
// come and go between releases (vLLM 0.10.2 deprecated
// --disable-log-requests, turning request logging off by default, and
// 0.12.0 removed it; PRs vllm-project/vllm#21739 and #29402). The table
// below holds the releases servetune knows and the flags whose life is
// shorter than that span; a flag not listed is taken to exist in every
// known release.

// Version is an engine release: major.minor.patch (a ".postN" suffix is
// the same release's rebuild and is dropped).
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less reports whether v is an earlier release than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// ParseVersion reads "0.11.0", "v0.11", "0.6.6.post1".
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.Index(t, ".post"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("version %q: want MAJOR.MINOR[.PATCH], e.g. 0.11.0", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Version{}, fmt.Errorf("version %q: want MAJOR.MINOR[.PATCH], e.g. 0.11.0", s)
		}
		n[i] = x
	}
	return Version{n[0], n[1], n[2]}, nil
}

func mustVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// releases are the oldest and newest release of each engine the flag
// table knows (the newest from the engines' public release notes: vLLM
// v0.26.0, SGLang v0.5.10.post1).
var releases = map[Engine][2]Version{
	VLLM:   {mustVersion("0.6.0"), mustVersion("0.26.0")},
	SGLang: {mustVersion("0.3.0"), mustVersion("0.5.10")},
}

// NewestVersion is the newest release of e the flag table knows: the
// version a printed command is for unless --engine-version picks another.
func NewestVersion(e Engine) Version { return releases[e][1] }

// CheckVersion refuses a release of e outside the span the flag table
// knows.
func CheckVersion(e Engine, v Version) error {
	r, ok := releases[e]
	if !ok {
		return fmt.Errorf("engine %q has no releases", e)
	}
	if v.Less(r[0]) || r[1].Less(v) {
		return fmt.Errorf("%s %s: servetune's flag table knows %s %s to %s", e, v, e, r[0], r[1])
	}
	return nil
}

// flagLife is a flag that exists in some releases only: from Since (zero:
// the oldest known) until before Until (zero: still there).
type flagLife struct {
	engine       Engine
	flag         string
	since, until Version
	why          string // what replaced it, with its source
}

var flagLives = []flagLife{
	{engine: VLLM, flag: "--disable-log-requests", until: mustVersion("0.12.0"),
		why: "request logging is off by default since 0.10.2 (--enable-log-requests turns it on); 0.12.0 removed the flag (vllm-project/vllm#21739, #29402)"},
	{engine: VLLM, flag: "--enable-log-requests", since: mustVersion("0.10.2"),
		why: "before 0.10.2 requests were logged unless --disable-log-requests (vllm-project/vllm#21739)"},
	{engine: VLLM, flag: "--no-enable-log-requests", since: mustVersion("0.10.2"),
		why: "before 0.10.2 requests were logged unless --disable-log-requests (vllm-project/vllm#21739)"},
	{engine: VLLM, flag: "--disable-async-output-proc", until: mustVersion("0.11.0"),
		why: "a flag of vLLM's V0 engine, which 0.11.0 removed"},
}

// CheckFlags lists the flags of argv that the given release of e does
// not take, each with why: "--disable-log-requests: vLLM 0.26.0 has no
// such flag (...)". None when every flag exists there.
func CheckFlags(e Engine, v Version, argv []string) []string {
	var out []string
	for _, a := range argv {
		name, _, _ := strings.Cut(a, "=")
		for _, l := range flagLives {
			if l.engine != e || l.flag != name {
				continue
			}
			zero := Version{}
			if (l.since != zero && v.Less(l.since)) || (l.until != zero && !v.Less(l.until)) {
				out = append(out, fmt.Sprintf("%s: %s %s has no such flag (%s)", name, e, v, l.why))
			}
		}
	}
	return out
}
