package slurm

import "syscall"

var errNoProcess = syscall.ESRCH

func syscallKill(pid int) error { return syscall.Kill(pid, 0) }
