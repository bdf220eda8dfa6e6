#!/bin/sh
# The systemd units as make generated them: systemd-analyze verify finds
# nothing to say about them, the service's exposure score stays under a
# threshold, the system call filter lets through what the daemon calls,
# and the sysusers.d file parses. Needs no systemd as PID 1: verify and
# security --offline read the files alone.
. "$top_srcdir/tests/integration/tap.sh"

command -v systemd-analyze >/dev/null 2>&1 ||
	skip_all "systemd-analyze not installed"
SERVICE=$top_builddir/systemd/loaderd.service
SOCKET=$top_srcdir/systemd/loaderd.socket
SYSUSERS=$top_srcdir/systemd/loaderd.sysusers
# systemd 252 rates the service 0.4 ("SAFE") on its scale of 0 to 10.
# The score is a weighted sum, so a lost directive may move it by only
# 0.1; the exposures the unit accepts are therefore listed one by one
# below, and the threshold is a backstop, not the guard.
MAX_EXPOSURE=1.0
# The C locale: the security table marks each check with "+" or "-"
# rather than a glyph, and sort and comm agree on one collation.
LC_ALL=C
export LC_ALL
tmpdir
plan 13

# The unit names the configured bindir (LOADER_BINDIR, from make).
line=$(grep '^ExecStart=' "$SERVICE")
is "$line" "ExecStart=$LOADER_BINDIR/loaderd --foreground" \
	"ExecStart names the installed daemon"
is "$(grep -c '@[A-Za-z_]*@' "$SERVICE")" 0 "no placeholder left in the unit"

# verify checks that ExecStart's program exists and is executable, so it
# runs on copies whose ExecStart names the daemon just built: the unit is
# otherwise byte for byte what make install puts in place, and no install
# (which would relink under a running make check) is needed. The copies
# keep the installed names, which verify takes the units' names from.
mkdir "$T/units"
sed "s|^ExecStart=$LOADER_BINDIR/loaderd |ExecStart=$top_builddir/loaderd |" \
	"$SERVICE" >"$T/units/loaderd.service"
cp "$SOCKET" "$T/units/loaderd.socket"

# verify FILE...: what systemd-analyze verify prints, and its status.
# It exits 0 on unknown directives and bad values, printing a line for
# each, so any output at all is a failure. --man=no: it would run man(1)
# for Documentation=, and loaderd(8) is not installed from a build tree
# (the man page's own build is checked by make distcheck). Generators
# are off by default for verify.
verify() {
	(cd "$T/units" && systemd-analyze verify --man=no "$@" 2>&1)
	echo "rc=$?"
}
out=$(verify loaderd.service loaderd.socket)
printf '%s\n' "$out" | sed 's/^/# verify: /'
is "$(printf '%s\n' "$out" | tr '\n' ' ')" "rc=0 " \
	"systemd-analyze verify: no output, status 0"

# With the drop-in for s3:// datasets (systemd/s3-network.conf) in place.
mkdir "$T/units/loaderd.service.d"
cp "$top_srcdir/systemd/s3-network.conf" "$T/units/loaderd.service.d/"
out=$(verify loaderd.service loaderd.socket)
printf '%s\n' "$out" | sed 's/^/# verify with s3-network.conf: /'
is "$(printf '%s\n' "$out" | tr '\n' ' ')" "rc=0 " \
	"systemd-analyze verify with the s3-network.conf drop-in: no output, status 0"
rm -r "$T/units/loaderd.service.d"

# The check above can only catch what verify reports: a unit with a bad
# value must make it speak, or the check proves nothing.
mkdir "$T/bad"
sed 's/^ProtectSystem=strict/ProtectSystem=bogus/' "$T/units/loaderd.service" \
	>"$T/bad/loaderd.service"
cp "$SOCKET" "$T/bad/loaderd.socket"
out=$(cd "$T/bad" && systemd-analyze verify --man=no loaderd.service \
	loaderd.socket 2>&1)
like "$out" 'bogus' "verify reports a bad value (the test can fail)"

# The exposure score, as "-> Overall exposure level for loaderd.service:
# 0.4 SAFE :-}"; the table goes to the log.
out=$(cd "$T/units" && systemd-analyze security --offline=yes \
	--no-pager ./loaderd.service 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
score=$(printf '%s\n' "$out" |
	sed -n 's/.*Overall exposure level for loaderd.service: \([0-9.]*\).*/\1/p')
like "$score" '^[0-9]+\.[0-9]$' "security --offline prints an exposure level"
ok "exposure level $score <= $MAX_EXPOSURE" \
	awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s <= m) }'
# The checks the service fails on purpose, each for a reason:
#  RootDirectory=/RootImage=: it runs on the host's libraries.
#  RestrictAddressFamilies=~AF_UNIX: its control socket is one.
#  PrivateUsers=: in a user namespace of its own, SO_PEERCRED would show
#   every client as "nobody" (the unit says more).
#  DeviceAllow=: ProtectClock= itself allows reading /dev/rtc, which
#   PrivateDevices= leaves out of the daemon's /dev anyway.
accepted="DeviceAllow= PrivateUsers= RestrictAddressFamilies=~AF_UNIX RootDirectory=/RootImage="
failed=$(printf '%s\n' "$out" | awk '$1 == "-" { print $2 }' | sort |
	tr '\n' ' ')
is "${failed% }" "$accepted" \
	"security: the service fails only the checks it accepts"

# syscalls GROUP: the system calls in a group of the local systemd, its
# nested groups expanded.
syscalls() {
	systemd-analyze syscall-filter "$1" | sed 1d | sed 's/^ *//' |
		grep -v '^#' | grep . | while read -r s; do
		case $s in
		@*) syscalls "$s" ;;
		*) echo "$s" ;;
		esac
	done
}
# What the filter lets through: @system-service less @privileged and
# @resources, the unit's two lines.
filter=$(grep '^SystemCallFilter=' "$SERVICE" | tr '\n' ' ')
is "${filter% }" "SystemCallFilter=@system-service SystemCallFilter=~@privileged @resources" \
	"the unit's filter is @system-service less @privileged and @resources"
syscalls @system-service | sort -u >"$T/allowed"
{ syscalls @privileged; syscalls @resources; } | sort -u >"$T/denied"
comm -23 "$T/allowed" "$T/denied" >"$T/filter"
# Every call the daemon made under strace (counted once, by hand:
# tests/integration/stream_order, stream_image, stream_life and
# daemon_abuse), through streams of raw, zstd and JPEG datasets with
# io_uring, registered buffers, memfd rings and futexes, hostile clients,
# start and stop. A libc or libuv update may add one; the filter then
# answers EPERM (SystemCallErrorNumber=), which this list cannot see.
need="futex io_uring_enter close epoll_wait newfstatat recvmsg pread64
write rt_sigprocmask mmap epoll_ctl munmap mprotect read sendmsg
set_robust_list rseq clone3 fcntl madvise memfd_create ftruncate exit
getpid ioctl getsockopt accept4 openat io_uring_register io_uring_setup
prlimit64 rt_sigaction brk sched_yield socket pipe2 unlink
set_tid_address lseek listen getrandom eventfd2 epoll_create1 connect
chmod bind arch_prctl access sysinfo poll execve exit_group"
missing=
for s in $need; do
	grep -qx "$s" "$T/filter" || missing="$missing $s"
done
is "${missing# }" "" "the filter allows every call the daemon needs"

# The sysusers.d file parses and makes user and group loaderd. --root
# and --dry-run: nothing is written, here or in the host's /etc.
if command -v systemd-sysusers >/dev/null 2>&1; then
	mkdir "$T/root"
	out=$(systemd-sysusers --dry-run --root="$T/root" "$SYSUSERS" 2>&1)
	is "$?" 0 "systemd-sysusers accepts loaderd.sysusers"
	like "$out" "^Creating user 'loaderd' .*GID" \
		"it makes user and group loaderd"
	other=$(printf '%s\n' "$out" |
		grep -v -e '^Creating group ' -e '^Creating user ' -e '^Would write ')
	is "$other" "" "and reports nothing else"
else
	for d in "sysusers file" "user loaderd" "nothing else"; do
		tap_n=$((tap_n + 1))
		echo "ok $tap_n # SKIP $d: systemd-sysusers not installed"
	done
fi
