#!/bin/sh
# test-packages.sh - the Debian packages, built, installed, used and
# purged on this machine (root, or through sudo):
#
#   1. build them from this checkout (scripts/build-packages.sh: tracked
#      files, and untracked ones git does not ignore, with
#      dpkg-buildpackage -us -uc -b); lint them
#      (lintian: no error); list them with their sizes;
#   2. install them with apt-get install ./*.deb: the user and group
#      loaderd exist, loaderd.socket is enabled through deb-systemd-helper
#      and loaderd.service is not, the configuration file is a conffile,
#      the units pass systemd-analyze verify;
#   3. start the installed daemon as the installed units say (systemd is
#      not PID 1 here): ExecStart=, User=, Group=, UMask=, the limits and
#      the directories of loaderd.service, and the socket of loaderd.socket
#      (path, owner, group, mode), through systemd-socket-activate
#      --seqpacket, with a NOTIFY_SOCKET listener (Type=notify);
#   4. as an unprivileged user in group loaderd: train with the installed
#      loader-train, stream with the installed Python package, and build
#      and run a C client against libloader-dev (pkg-config loader); a
#      user outside the group is refused at the socket;
#   5. upgrade: while that user's named stream holds batches, reinstall
#      the packages (apt-get install --reinstall) and restart the daemon
#      as the postinst's try-restart would under systemd; the stream must
#      end with every sample of every epoch exactly once, and no error;
#   6. purge with apt-get purge: no file of the packages, no state, cache
#      or runtime directory, no unit enablement is left; the user and group
#      loaderd are (Debian keeps system accounts: loaderd(8), FILES).
#
# Prints TAP-like "ok N - ..." lines and the transcript of each step; exits
# non-zero if anything failed, 77 if it cannot run here (not root and no
# sudo). Refuses to run where the packages are already installed: it would
# purge them, or where /etc/loaderd, /var/lib/loaderd, /var/cache/loaderd
# or /run/loaderd exist (a purge would take them), or its test users do.
# Leaves the machine as it found it: the test users go, and the loaderd
# user too if this run created it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		exec sudo -n "$0" "$@"
	fi
	echo "test-packages.sh: needs root (or sudo) to install packages; skipped" >&2
	exit 77
fi
pkgs="loaderd libloader1 libloader-dev python3-loader loader-train"
for p in $pkgs; do
	if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
		grep -qv '^not-installed$'; then
		echo "test-packages.sh: $p is installed (or its configuration files are); this test installs and purges the packages: purge them first (apt-get purge $pkgs)" >&2
		exit 1
	fi
done

trainer=ldpkg-trainer
outsider=ldpkg-outsider
# What the install, the daemon and the purge make and remove must be this
# run's: a loaderd installed by hand keeps its configuration and state
# there, and the test's own users must not be someone's.
for f in /etc/loaderd /var/lib/loaderd /var/cache/loaderd /run/loaderd; do
	if [ -e "$f" ]; then
		echo "test-packages.sh: $f exists; the packages' purge would remove it: move it away first" >&2
		exit 1
	fi
done
for u in $trainer $outsider; do
	if getent passwd $u >/dev/null; then
		echo "test-packages.sh: user $u exists; this test makes and removes it: remove it first" >&2
		exit 1
	fi
done

export DEBIAN_FRONTEND=noninteractive
W=$(mktemp -d /tmp/loaderd-packages.XXXXXX) || exit 2
chmod 0755 "$W"
had_user=0
getent passwd loaderd >/dev/null && had_user=1
daemon_pid=
listener_pid=
n=0
failed=0

ok() {
	n=$((n + 1))
	desc=$1
	shift
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		failed=$((failed + 1))
	fi
}
step() { echo; echo "== $*"; }
die() {
	echo "not ok - $*"
	failed=$((failed + 1))
	exit 1
}

cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
	[ -n "$listener_pid" ] && kill "$listener_pid" 2>/dev/null
	for p in $pkgs; do
		if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
			grep -qv '^not-installed$'; then
			apt-get purge -y -q $pkgs >/dev/null 2>&1
			break
		fi
	done
	for u in $trainer $outsider; do
		getent passwd $u >/dev/null && userdel $u
	done
	if [ $had_user -eq 0 ] && getent passwd loaderd >/dev/null; then
		userdel loaderd
		getent group loaderd >/dev/null && groupdel loaderd
	fi
	rm -rf "$W"
	echo
	if [ $failed -eq 0 ]; then
		echo "test-packages.sh: $n passed"
	else
		echo "test-packages.sh: $((n - failed)) passed, $failed FAILED"
		exit 1
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- 1. build, lint, list -------------------------------------------------
step "build: scripts/build-packages.sh (dpkg-buildpackage -us -uc -b)"
scripts/build-packages.sh "$W" >/dev/null || die "scripts/build-packages.sh failed"
ok "dpkg-buildpackage -us -uc -b builds the packages" true
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
debs=
for p in $pkgs; do
	debs="$debs $W/${p}_${version}_$(dpkg --print-architecture).deb"
done
for d in $debs; do
	[ -f "$d" ] || die "no $d"
done

step "lintian"
lintian --fail-on error --info "$W"/loaderd_*.changes >"$W/lintian.log" 2>&1
lrc=$?
sed 's/^/  /' "$W/lintian.log"
[ -s "$W/lintian.log" ] || echo "  (no tags)"
ok "lintian reports no error (exit $lrc)" test $lrc -eq 0
ok "lintian's output has no E: line" sh -c "! grep -q '^E:' '$W/lintian.log'"

step "packages"
printf '  %-34s %10s %16s\n' package "deb bytes" "Installed-Size"
for d in $debs; do
	printf '  %-34s %10s %13s KiB\n' "$(basename "$d")" "$(stat -c %s "$d")" \
		"$(dpkg-deb -f "$d" Installed-Size)"
done

# ---- 2. install ------------------------------------------------------------
step "install: apt-get install ./*.deb"
# apt-get takes a local file only as a path with a slash.
if ! apt-get install -y -q --no-install-recommends $debs >"$W/install.log" 2>&1; then
	tail -30 "$W/install.log"
	die "apt-get install failed"
fi
grep -E '^(Setting up|Unpacking|Selecting|Created symlink)' "$W/install.log" | sed 's/^/  /'
for p in $pkgs; do
	ok "$p is installed" sh -c \
		"dpkg-query -W -f='\${db:Status-Status}' $p | grep -qx installed"
	dpkg -L $p >"$W/files.$p"
done
pw=$(getent passwd loaderd)
echo "  passwd: $pw"
echo "  group:  $(getent group loaderd)"
uid=$(echo "$pw" | cut -d: -f3)
ok "the system user loaderd exists (uid below 1000)" test "${uid:-1000}" -lt 1000
ok "it has no login shell" sh -c "echo '$pw' | grep -q ':/usr/sbin/nologin\$'"
ok "the group loaderd exists" sh -c "getent group loaderd >/dev/null"
# deb-systemd-helper answers only within a maintainer script.
dsh() { DPKG_MAINTSCRIPT_PACKAGE=loaderd deb-systemd-helper "$@"; }
ok "loaderd.socket is enabled (deb-systemd-helper is-enabled)" \
	dsh is-enabled loaderd.socket
ok "sockets.target wants loaderd.socket" \
	test "$(readlink /etc/systemd/system/sockets.target.wants/loaderd.socket)" = \
	/lib/systemd/system/loaderd.socket
ok "loaderd.service itself is wanted by nothing (the socket starts it)" \
	sh -c '! ls /etc/systemd/system/*.wants/loaderd.service 2>/dev/null | grep -q .'
ok "/etc/loaderd/loaderd.conf is a conffile" sh -c \
	"dpkg-query -W -f='\${Conffiles}' loaderd | grep -q '^ /etc/loaderd/loaderd.conf '"
systemd-analyze verify /lib/systemd/system/loaderd.socket \
	/lib/systemd/system/loaderd.service >"$W/verify.log" 2>&1
vrc=$?
sed 's/^/  /' "$W/verify.log"
ok "the installed units pass systemd-analyze verify, without a warning" \
	test $vrc -eq 0 -a ! -s "$W/verify.log"
pyfile=$(cd / && /usr/bin/python3 -c 'import loader; print(loader.__file__)' 2>&1)
ok "the installed Python package is the one python3 imports ($pyfile)" \
	test "$pyfile" = /usr/lib/python3/dist-packages/loader/__init__.py
ok "pkg-config loader gives the packages' version" \
	test "$(pkg-config --modversion loader)" = "${version%%-*}"

# ---- 3. the daemon, as the units start it ------------------------------------
step "start the installed daemon as loaderd.socket and loaderd.service say"
svc=/lib/systemd/system/loaderd.service
sock_unit=/lib/systemd/system/loaderd.socket
for f in /etc/systemd/system/loaderd.service.d /etc/systemd/system/loaderd.socket.d \
	/run/systemd/system/loaderd.service.d; do
	[ -e "$f" ] && die "drop-in $f present: the test reads the units alone"
done
key() { sed -n "s/^$2=//p" "$1" | tail -1; }
exec_start=$(key $svc ExecStart)
user=$(key $svc User)
group=$(key $svc Group)
umask_=$(key $svc UMask)
nofile=$(key $svc LimitNOFILE)
rundir=/run/$(key $svc RuntimeDirectory)
rundir_mode=$(key $svc RuntimeDirectoryMode)
statedir=/var/lib/$(key $svc StateDirectory)
state_mode=$(key $svc StateDirectoryMode)
cachedir=/var/cache/$(key $svc CacheDirectory)
cache_mode=$(key $svc CacheDirectoryMode)
sock=$(key $sock_unit ListenSequentialPacket)
sock_user=$(key $sock_unit SocketUser)
sock_group=$(key $sock_unit SocketGroup)
sock_mode=$(key $sock_unit SocketMode)
dir_mode=$(key $sock_unit DirectoryMode)
echo "  ExecStart=$exec_start User=$user Group=$group UMask=$umask_ LimitNOFILE=$nofile"
echo "  RuntimeDirectory $rundir ($rundir_mode), StateDirectory $statedir ($state_mode), CacheDirectory $cachedir ($cache_mode)"
echo "  ListenSequentialPacket=$sock SocketUser=$sock_user SocketGroup=$sock_group SocketMode=$sock_mode DirectoryMode=$dir_mode"
[ -n "$exec_start" ] && [ -n "$user" ] && [ -n "$sock" ] ||
	die "could not read ExecStart=, User= and ListenSequentialPacket= from the units"

# What systemd does before it starts the socket and the service.
install -d -m "$dir_mode" "$(dirname "$sock")"
install -d -m "$rundir_mode" -o "$user" -g "$group" "$rundir"
install -d -m "$state_mode" -o "$user" -g "$group" "$statedir"
install -d -m "$cache_mode" -o "$user" -g "$group" "$cachedir"

# Type=notify: a listener on NOTIFY_SOCKET, writable by the daemon's user.
cat >"$W/listen.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666)
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        for line in s.recv(4096).decode("utf-8", "replace").splitlines():
            log.write(line + "\n")
PY
: >"$W/notify.log"
/usr/bin/python3 "$W/listen.py" "$W/notify" "$W/notify.log" &
listener_pid=$!
wait_for() { # PREDICATE... : up to 30 s
	i=0
	while ! "$@"; do
		i=$((i + 1))
		[ $i -gt 300 ] && return 1
		sleep 0.1
	done
}
wait_for test -S "$W/notify" || die "the notify listener did not start"

# One activation, as loaderd.socket and loaderd.service make it. The
# socket must have its owner and mode from the moment trainers can reach
# it (a reconnecting client that found it root's would be refused), and
# systemd-socket-activate gives it its own: it binds a name beside it,
# which gets SocketUser=, SocketGroup= and SocketMode= and is then renamed
# to ListenSequentialPacket= (the daemon's log names the first name: the
# one it was bound to). On the first connection it executes ExecStart=
# under User=/Group= (setpriv, and sh for UMask=: both keep the pid, so
# LISTEN_PID and MAINPID stay right), with the service's file limit as
# far as this machine's hard limit allows.
hard=$(ulimit -Hn)
[ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ] && {
	echo "  LimitNOFILE=$nofile is above this machine's hard limit, $hard: using $hard"
	nofile=$hard
}
activate() {
	rm -f "$sock" "$sock.bind"
	(
		ulimit -n "$nofile"
		# shellcheck disable=SC2086 # ExecStart= is split as systemd does
		exec systemd-socket-activate --seqpacket -l "$sock.bind" \
			-E NOTIFY_SOCKET="$W/notify" -E RUNTIME_DIRECTORY="$rundir" \
			-E STATE_DIRECTORY="$statedir" -E CACHE_DIRECTORY="$cachedir" \
			-E PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			/usr/bin/setpriv --reuid="$user" --regid="$group" --init-groups \
			--inh-caps=-all --bounding-set=-all \
			/bin/sh -c "umask $umask_ && exec $exec_start"
	) 2>>"$W/daemon.log" &
	daemon_pid=$!
	wait_for test -S "$sock.bind" ||
		die "systemd-socket-activate did not bind $sock.bind"
	chown "$sock_user:$sock_group" "$sock.bind"
	chmod "$sock_mode" "$sock.bind"
	mv "$sock.bind" "$sock"
}
# An administrator's change to the conffile, which the daemon must read and
# an upgrade must keep.
sed -i 's/^#threads = 0$/threads = 3/' /etc/loaderd/loaderd.conf
grep -qx 'threads = 3' /etc/loaderd/loaderd.conf ||
	die "no '#threads = 0' line in /etc/loaderd/loaderd.conf to edit"
activate
first_pid=$daemon_pid
ls -l "$sock" | sed 's/^/  /'
ok "the socket is $sock_user:$sock_group, mode $sock_mode, as loaderd.socket says" \
	test "$(stat -c '%U:%G 0%a' "$sock")" = "$sock_user:$sock_group $sock_mode"

# ---- 4. clients: a member of group loaderd, and an outsider -----------------
step "clients"
useradd -M -d /nonexistent -s /bin/sh -G loaderd $trainer || die "useradd $trainer"
useradd -M -d /nonexistent -s /bin/sh $outsider || die "useradd $outsider"
echo "  $(id $trainer)"
echo "  $(id $outsider)"
run_as() { # USER COMMAND...: run from $W with a plain environment
	u=$1
	shift
	(cd "$W" && runuser -u "$u" -- env -i PATH=/usr/bin:/bin HOME=/nonexistent \
		LOADERD_SOCKET="$sock" "$@")
}
# The trainer's datasets are its own, mode 0700: the daemon cannot open
# them by path, only through the descriptors the client passes.
install -d -m 0700 -o $trainer -g $trainer "$W/fm"
run_as $trainer loaderctl pack /usr/share/datasets/fashion-mnist "$W/fm" \
	>"$W/pack.log" 2>&1
ok "the installed loaderctl packs Fashion-MNIST as $trainer" test -d "$W/fm/train"

run_as $trainer loader-train --data "$W/fm" --epochs 3 --early-stop --target 0.80 \
	--quiet >"$W/train.log" 2>&1
trc=$?
sed 's/^/  /' "$W/train.log"
ok "the installed loader-train trains as $trainer to test accuracy 0.80 (exit $trc)" \
	test $trc -eq 0
ok "the daemon said READY=1 on NOTIFY_SOCKET" grep -qx 'READY=1' "$W/notify.log"
ok "the first connection started the daemon as user $user" \
	test "$(ps -o user= -p $first_pid 2>/dev/null)" = "$user"
sed 's/^/  /' "$W/daemon.log"
ok "it read the packaged configuration file, as edited (threads = 3)" \
	grep -q 'with 3 decode threads' "$W/daemon.log"

cat >"$W/stream.py" <<'PY'
import sys
import numpy as np
import loader
n = 0
with loader.Stream(sys.argv[1] + "/test", batch_size=500, epochs=1,
                   order="random", seed=3, outputs="image,label") as s:
    seen = []
    for b in s:
        img = np.asarray(b["image"])
        assert img.shape[1:] == (28, 28), img.shape
        seen.extend(np.asarray(b.ids).tolist())
print(len(seen), len(set(seen)), loader.__file__)
PY
out=$(run_as $trainer /usr/bin/python3 "$W/stream.py" "$W/fm" 2>&1)
echo "  $out"
ok "the installed Python package streams the test split as $trainer" \
	test "$out" = "10000 10000 /usr/lib/python3/dist-packages/loader/__init__.py"

cat >"$W/count.c" <<'EOF'
#include <stdio.h>
#include <loader.h>
int main(int argc, char **argv)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader *l;
	struct loader_batch b;
	char err[512];
	unsigned long samples = 0;
	int rc;
	o.batch_size = 1000;
	o.epochs = 1;
	o.outputs = "label";
	if ((rc = loader_open(&l, argv[1], &o, err, sizeof err)) < 0) {
		fprintf(stderr, "loader_open: %d %s\n", rc, err);
		return 1;
	}
	while ((rc = loader_next(l, &b, 10000)) == 0) {
		samples += b.count;
		loader_release(l, &b);
	}
	loader_close(l);
	printf("%lu %s\n", samples, rc == LOADER_EEND ? "end" : "error");
	return rc != LOADER_EEND;
}
EOF
# shellcheck disable=SC2046
cc -o "$W/count" "$W/count.c" $(pkg-config --cflags --libs loader) 2>&1 | sed 's/^/  /'
out=$(run_as $trainer "$W/count" "$W/fm/test" 2>&1)
echo "  $out"
ok "a C client built with pkg-config loader (libloader-dev) streams as $trainer" \
	test "$out" = "10000 end"

chmod 0755 "$W/fm"
out=$(run_as $outsider /usr/bin/python3 -c "
import loader
try:
    loader.Stream('$W/fm/test', epochs=1)
except Exception as e:
    print(type(e).__name__, e)
" 2>&1)
echo "  $out"
ok "a user outside group loaderd is refused at the socket" \
	sh -c "echo '$out' | grep -qi 'permission denied'"
chmod 0700 "$W/fm"

# ---- 5. upgrade while a named stream holds batches ----------------------------
step "upgrade: reinstall while a named stream holds batches"
cat >"$W/ride.py" <<'PY'
import os, sys, time
import numpy as np
import loader
d, w = sys.argv[1], sys.argv[2]
seen = {}
held = []
# A named stream: reconnect_ms is left at its default (60 s).
with loader.Stream(d + "/test", name="ride-upgrade", fresh=True,
                   batch_size=250, epochs=2, order="random", seed=5,
                   outputs="image,label") as s:
    for i, b in enumerate(s):
        held.append(np.asarray(b["image"]))  # views: the batches stay held
        held = held[-2:]
        seen.setdefault(b.epoch, []).extend(np.asarray(b.ids).tolist())
        if i == 25:
            open(w + "/held", "w").close()
            while not os.path.exists(w + "/go"):
                time.sleep(0.05)
for e, ids in sorted(seen.items()):
    print("epoch", e, len(ids), len(set(ids)), sorted(ids) == list(range(10000)))
PY
install -d -o $trainer "$W/sig"
run_as $trainer /usr/bin/python3 "$W/ride.py" "$W/fm" "$W/sig" >"$W/ride.log" 2>&1 &
ride=$!
wait_for test -e "$W/sig/held" || die "the named stream did not reach batch 25"
echo "  the stream holds batches 24 and 25 of epoch 0"
if ! apt-get install -y -q --reinstall --no-install-recommends $debs \
	>"$W/reinstall.log" 2>&1; then
	tail -30 "$W/reinstall.log"
	die "apt-get install --reinstall failed"
fi
grep -E '^(Preparing|Unpacking|Setting up)' "$W/reinstall.log" | sed 's/^/  /'
ok "apt-get install --reinstall of the packages succeeds" true
ok "it kept the administrator's change to /etc/loaderd/loaderd.conf" \
	grep -qx 'threads = 3' /etc/loaderd/loaderd.conf
# systemctl try-restart loaderd.service: SIGTERM (KillMode= default), wait,
# start it again; the socket unit stays (here the activation helper
# listens again, as loaderd.socket would have throughout).
kill -TERM "$daemon_pid"
wait "$daemon_pid"
echo "  daemon $daemon_pid stopped (exit $?); starting it again"
: >"$W/sig/go"
activate
wait "$ride"
rrc=$?
sed 's/^/  /' "$W/ride.log"
ok "the stream ends without an error (exit $rrc)" test $rrc -eq 0
ok "epoch 0: every sample exactly once across the upgrade" \
	grep -qx 'epoch 0 10000 10000 True' "$W/ride.log"
ok "epoch 1: every sample exactly once" grep -qx 'epoch 1 10000 10000 True' "$W/ride.log"
ok "a new daemon served it (READY=1 twice)" \
	test "$(grep -cx 'READY=1' "$W/notify.log")" -eq 2
ok "the new daemon read the kept change" \
	test "$(grep -c 'with 3 decode threads' "$W/daemon.log")" -eq 2

kill -TERM "$daemon_pid"
wait "$daemon_pid"
drc=$?
daemon_pid=
ok "the daemon stops on SIGTERM with status 0, saying STOPPING=1" \
	sh -c "test $drc -eq 0 && grep -qx 'STOPPING=1' '$W/notify.log'"
kill "$listener_pid"
listener_pid=
rm -f "$sock"

# ---- 6. purge -------------------------------------------------------------
step "purge: apt-get purge $pkgs"
if ! apt-get purge -y -q $pkgs >"$W/purge.log" 2>&1; then
	tail -30 "$W/purge.log"
	die "apt-get purge failed"
fi
grep -E '^(Removing|Purging)' "$W/purge.log" | sed 's/^/  /'
for p in $pkgs; do
	ok "$p is purged" sh -c \
		"dpkg-query -W -f='\${db:Status-Status}' $p 2>/dev/null | grep -qx not-installed || ! dpkg-query -W $p >/dev/null 2>&1"
done
cat "$W"/files.* | sort -u >"$W/files"
# Directories stay where other packages have files in them.
left=$(while read -r f; do
	[ -d "$f" ] && continue
	[ -e "$f" ] || [ -L "$f" ] && echo "$f"
done <"$W/files")
ok "no file of the packages is left" test -z "$left"
[ -n "$left" ] && echo "$left" | sed 's/^/  left: /'
for d in /etc/loaderd /var/lib/loaderd /var/cache/loaderd /run/loaderd \
	/usr/share/doc/loaderd /usr/lib/python3/dist-packages/loader; do
	ok "$d is gone" test ! -e "$d"
done
ok "no unit enablement is left" sh -c \
	'! ls /etc/systemd/system/*/loaderd.* /var/lib/systemd/deb-systemd-helper-enabled/loaderd.* /var/lib/systemd/deb-systemd-helper-enabled/*/loaderd.* 2>/dev/null | grep -q .'
ok "the user loaderd is kept (Debian keeps system accounts on purge)" \
	sh -c "getent passwd loaderd >/dev/null"
ok "the group loaderd is kept" sh -c "getent group loaderd >/dev/null"
echo "  kept: $(getent passwd loaderd)"
