// Package proc identifies the process that runs a study (its owner) and
// tells whether an owner is still alive, so that a second process refuses
// a live study and reapers remove only what dead runs left.
//
// An Owner is the host name, the process id and the process's start time
// (from /proc on Linux, so a reused pid is not mistaken for the owner),
// plus a random run id. It prints as "host/pid/start/run" for labels and
// the store. Alive is exact for owners on this host; for another host it
// reports unknown.
//
// Functions here are safe for concurrent use.
package proc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Owner is one process that runs a study.
type Owner struct {
	Host  string
	PID   int
	Start uint64 // the process's start time in clock ticks since boot; 0 when unknown
	Run   string // random id of the run
}

var (
	selfOnce sync.Once
	self     Owner
)

// Self is this process, with a run id drawn once per process.
func Self() Owner {
	selfOnce.Do(func() {
		self = Owner{Host: hostname(), PID: os.Getpid(), Start: startTime(os.Getpid()), Run: newRunID()}
	})
	return self
}

// NewRun is this process with a fresh run id (one process may run several
// studies, each a run of its own).
func NewRun() Owner {
	o := Self()
	o.Run = newRunID()
	return o
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// String is "host/pid/start/run".
func (o Owner) String() string {
	return fmt.Sprintf("%s/%d/%d/%s", o.Host, o.PID, o.Start, o.Run)
}

// Parse reads what String writes.
func Parse(s string) (Owner, error) {
	f := strings.Split(s, "/")
	if len(f) != 4 {
		return Owner{}, fmt.Errorf("owner %q: want host/pid/start/run", s)
	}
	pid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("owner %q: bad pid or start time", s)
	}
	return Owner{Host: f[0], PID: pid, Start: start, Run: f[3]}, nil
}

// Describe is the owner as a person reads it: "pid 1234 on host gpu-a".
func (o Owner) Describe() string { return fmt.Sprintf("pid %d on host %s", o.PID, o.Host) }

// Local reports whether the owner runs on this host.
func (o Owner) Local() bool { return o.Host == hostname() }

// Alive reports whether the owner process still runs. known is false for
// an owner on another host, where nothing can be checked from here.
func (o Owner) Alive() (alive, known bool) {
	if !o.Local() {
		return false, false
	}
	if o.PID == os.Getpid() && (o.Start == 0 || o.Start == Self().Start) {
		return true, true
	}
	if !pidAlive(o.PID) {
		return false, true
	}
	// A pid the kernel reused belongs to another process.
	if st := startTime(o.PID); o.Start != 0 && st != 0 && st != o.Start {
		return false, true
	}
	return true, true
}

// startTime reads a process's start time (field 22 of /proc/PID/stat); 0
// where /proc is not there.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
