# Sourced by scripts/slurm-up.sh and scripts/kube-up.sh.
#
# pidfile_ours PIDFILE PROGRAM: true when PIDFILE names a live process whose
# executable is named PROGRAM. A pid file that outlived a restart of the
# machine names whatever process has that pid now: that process must be
# neither taken for the daemon nor killed. A zombie or an exited process
# has no executable link and is not ours.
pidfile_ours() {
	local pid exe
	[ -s "$1" ] || return 1
	pid=$(cat "$1") || return 1
	case $pid in '' | *[!0-9]*) return 1 ;; esac
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	[ "${exe##*/}" = "$2" ]
}
