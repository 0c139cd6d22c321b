#!/usr/bin/env bash
# Builds the Debian package (cargo-deb, from the release build) and tests it
# on a fresh Debian bookworm, printing a PASS/FAIL line per check:
# 1. a debootstrap minbase root (in memory), the package installed with
#    dpkg -i (apt-get -f install brings procps), the user, files and
#    conffile checked, `gateway --version` and `--check`;
# 2. the gateway run from it as the user `gateway` (its own network
#    namespace: nothing on this host's ports), curl on the listener (HTTP/1.1
#    and h2c) and the admin's /ready, SIGTERM;
# 3. gateway-restarter: SIGHUP under traffic (epoch 1 takes over, no
#    request fails), a SIGHUP onto a broken bootstrap (the running epoch
#    serves on), SIGTERM;
# 4. dpkg -i over itself with the bootstrap edited (kept), remove, purge;
# 5. the same root booted with systemd in systemd-nspawn: the package
#    installed on a running systemd, the unit verified, enabled, reloaded
#    under traffic, reloaded with a broken bootstrap (refused), stopped,
#    and the package purged while the service runs.
# See deploy/README.md, "Packages".
#
# Usage: .ci/package.sh            build (cargo reuses target/release when
#                                  it is up to date), package, test
#        PACKAGE_SKIP_BUILD=1 ...  package what target/release holds
#        PACKAGE_PROFILE=dev ...   package the debug build (target/debug): CI
#        PACKAGE_SKIP_TEST=1 ...   build and package only
#        PACKAGE_SKIP_SYSTEMD=1 .. leave out part 5
#        KNOWN_GAPS="" ...         make the known gaps (see below) failures
# The test needs root (debootstrap, chroot, mounts, network namespaces) and
# the Debian mirror ($DEBIAN_MIRROR); without root it says so and skips.
# The fresh root is cached under ~/.cache/gateway-ci/ ($GATEWAY_CI_CACHE)
# for a week: debootstrap's tarball of bookworm's packages, and the tree
# debootstrap made from it before anything else touched it. With the
# release build up to date a run takes about 40 s (about a minute without
# the cache); a release build (fat LTO) adds several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${GATEWAY_CI_CACHE:-$HOME/.cache/gateway-ci}
OUT=$ROOT/target/debian
# Ports of the default bootstrap (deploy/debian/bootstrap.yaml).
LISTENER=8080
ADMIN=9901

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check DESCRIPTION COMMAND...: PASS or FAIL by the command's status.
check() {
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
die() {
    echo "FAIL: $*"
    echo "== package.sh: FAILED"
    exit 1
}
started=$(date +%s)

# --- Build and package --------------------------------------------------

# PACKAGE_PROFILE=dev packages the debug build (what CI has built
# already; a release build with fat LTO would take CI several minutes):
# the same package, larger and slower binaries.
PROFILE=${PACKAGE_PROFILE:-release}
case "$PROFILE" in
    release) BUILD_FLAGS=(--release); BIN_DIR=target/release ;;
    dev) BUILD_FLAGS=(); BIN_DIR=target/debug ;;
    *) die "PACKAGE_PROFILE=$PROFILE: expected release or dev" ;;
esac
if [ -z "${PACKAGE_SKIP_BUILD:-}" ]; then
    echo "== cargo build ${BUILD_FLAGS[*]} -p gateway --bins"
    cargo build "${BUILD_FLAGS[@]}" -p gateway --bins
fi
for b in gateway gateway-restarter; do
    [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b is missing (cargo build ${BUILD_FLAGS[*]} -p gateway --bins)"
done
if ! cargo deb --version >/dev/null 2>&1; then
    echo "== cargo install cargo-deb --locked"
    cargo install cargo-deb --locked
fi
echo "== cargo deb -p gateway --no-build --profile $PROFILE"
rm -f "$OUT"/gateway_*.deb "$OUT"/gateway-dbgsym_*.ddeb
cargo deb -p gateway --no-build --profile "$PROFILE" -o "$OUT/"
deb=$(ls "$OUT"/gateway_*_*.deb)
echo "built $deb ($(du -h "$deb" | cut -f1))"

# The package's contents, before installing it anywhere.
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/gateway ./usr/bin/gateway-restarter ./lib/systemd/system/gateway.service \
    ./etc/gateway/bootstrap.yaml ./usr/share/doc/gateway/copyright ./usr/share/doc/gateway/README.md; do
    check "package holds $f" grep -q " $f\$" <<<"$contents"
done
check "bootstrap.yaml is a conffile" \
    bash -c "dpkg-deb -I '$deb' conffiles | grep -qx /etc/gateway/bootstrap.yaml"
depends=$(dpkg-deb -f "$deb" Depends)
check "Depends: $depends (libc6 from \$auto, adduser, procps)" \
    bash -c "grep -q 'libc6 (>=' <<<'$depends' && grep -q adduser <<<'$depends' && grep -q procps <<<'$depends'"

if [ -n "${PACKAGE_SKIP_TEST:-}" ]; then
    echo "== install test skipped (PACKAGE_SKIP_TEST)"
    [ "$failures" -eq 0 ] || die "$failures check(s) failed"
    echo "== package.sh: PASS ($(($(date +%s) - started)) s)"
    exit 0
fi

# --- A fresh Debian -----------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: installing the package needs root (debootstrap, chroot); the package was built"
    [ "$failures" -eq 0 ] || die "$failures check(s) failed"
    exit 0
fi
for t in debootstrap curl ip zstd; do
    if ! command -v "$t" >/dev/null; then
        apt-get install -y -q debootstrap curl iproute2 zstd >/dev/null 2>&1 || true
    fi
done
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"

work=$(mktemp -d /tmp/gateway-package.XXXXXX)
rootfs=$work/root
netns=gwpkg$$
mounts=()
pids=()
cleanup() {
    local rc=$?
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    # Whatever the test started that is still in its network namespace.
    for p in $(ip netns pids "$netns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
    done
    ip netns del "$netns" 2>/dev/null || true
    # Never delete through a mount that is still there.
    if ! grep -q " ${work}[/ ]" /proc/mounts; then rm -rf "$work"; else
        echo "left $work: something is still mounted under it" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT INT TERM
# Everything the test writes goes to memory (about 350 MB), not the disk.
mount -t tmpfs -o size=2g,mode=0755 gateway-package "$work"
mounts+=("$work")

mkdir -p "$CACHE"
tarball=$CACHE/$SUITE-minbase.tgz
fresh=$CACHE/$SUITE-minbase-rootfs.tar.zst
# Rebuilt weekly, so the "fresh" system follows the suite's updates.
if [ -f "$fresh" ] && [ -n "$(find "$fresh" -mtime -7)" ]; then
    echo "== fresh $SUITE root from the cache ($fresh)"
    mkdir "$rootfs"
    tar -C "$rootfs" --zstd -xpf "$fresh"
else
    if [ ! -f "$tarball" ] || [ -z "$(find "$tarball" -mtime -7)" ]; then
        echo "== debootstrap --make-tarball ($SUITE, minbase, from $MIRROR)"
        timeout 600 debootstrap --variant=minbase --make-tarball="$tarball.tmp" \
            "$SUITE" "$work/make-tarball" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
            { tail -20 "$work/debootstrap.log"; die "debootstrap --make-tarball"; }
        mv "$tarball.tmp" "$tarball"
    fi
    echo "== debootstrap --unpack-tarball ($SUITE, minbase)"
    timeout 600 debootstrap --variant=minbase --unpack-tarball="$tarball" \
        "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
        { tail -20 "$work/debootstrap.log"; die "debootstrap"; }
    tar -C "$rootfs" --zstd -cpf "$fresh.tmp" . && mv "$fresh.tmp" "$fresh"
fi
check "fresh root is Debian $SUITE" grep -q "VERSION_CODENAME=$SUITE" "$rootfs/etc/os-release"
check "fresh root has no gateway user yet" bash -c "! chroot '$rootfs' getent passwd gateway >/dev/null"

# What a running system has: /proc, /sys (read-only), /dev. io_uring needs
# nothing more than the kernel. No /run/systemd/system: the maintainer
# scripts skip systemctl, as on any system not booted with systemd.
mount_at() { # mount_at TARGET MOUNT-ARGS...
    local target=$1
    shift
    mount "$@" "$target"
    mounts+=("$target")
}
mount_at "$rootfs/proc" -t proc proc
mount_at "$rootfs/sys" -t sysfs -o ro sysfs
mount_at "$rootfs/dev" --bind /dev
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
in_root() { chroot "$rootfs" "$@"; }

# --- Install ------------------------------------------------------------

echo "== dpkg -i $(basename "$deb"), then apt-get -f install for its dependencies"
cp "$deb" "$rootfs/tmp/"
debname=$(basename "$deb")
export DEBIAN_FRONTEND=noninteractive
# When a dependency is missing, dpkg leaves the package unconfigured and
# apt-get -f install brings the dependency and configures it (postinst).
# (bookworm's minbase has adduser, not procps: this path is taken.)
if in_root dpkg -i "/tmp/$debname" >"$work/dpkg-i.log" 2>&1; then
    : >"$work/apt.log"
else
    grep -m1 "depends on" "$work/dpkg-i.log" | sed 's/^/  dpkg -i| /' || true
    timeout 300 chroot "$rootfs" apt-get update -q >"$work/apt.log" 2>&1 ||
        { tail -20 "$work/apt.log"; die "apt-get update in the chroot"; }
    timeout 300 chroot "$rootfs" apt-get -f install -y -q --no-install-recommends >>"$work/apt.log" 2>&1 ||
        { cat "$work/dpkg-i.log"; tail -30 "$work/apt.log"; die "apt-get -f install"; }
fi
# postinst's message.
cat "$work/dpkg-i.log" "$work/apt.log" |
    awk '/^Setting up gateway/ { on = 1; next } on && /^(Setting up|Processing|Selecting) / { on = 0 } on' |
    sed 's/^/  postinst| /'
check "package installed (dpkg status ii)" \
    bash -c "chroot '$rootfs' dpkg-query -W -f='\${db:Status-Abbrev}' gateway | grep -q '^ii'"
check "system user gateway" bash -c "chroot '$rootfs' getent passwd gateway | grep -q ':/nonexistent:/usr/sbin/nologin$'"
check "system group gateway, the user's primary group" \
    bash -c "[ \"\$(chroot '$rootfs' id -gn gateway)\" = gateway ]"
check "user gateway is a system user (uid < 1000)" bash -c "[ \"\$(chroot '$rootfs' id -u gateway)\" -lt 1000 ]"
check "no home directory made" test ! -e "$rootfs/home/gateway"
for f in /usr/bin/gateway /usr/bin/gateway-restarter; do
    check "$f installed, executable" test -x "$rootfs$f"
done
check "/lib/systemd/system/gateway.service installed" test -f "$rootfs/lib/systemd/system/gateway.service"
check "/etc/gateway/bootstrap.yaml installed, a conffile" \
    bash -c "chroot '$rootfs' dpkg-query -W -f='\${Conffiles}' gateway | grep -q '/etc/gateway/bootstrap.yaml'"
check "/var/log/gateway owned by gateway" bash -c "[ \"\$(chroot '$rootfs' stat -c %U:%G /var/log/gateway)\" = gateway:gateway ]"
check "/bin/kill (the unit's ExecReload) installed" test -x "$rootfs/bin/kill"
check "service not enabled by the package" \
    bash -c "! ls '$rootfs'/etc/systemd/system/*/gateway.service >/dev/null 2>&1"
version=$(in_root /usr/bin/gateway --version 2>&1) || true
check "gateway --version ($version)" grep -q '^gateway ' <<<"$version"
check "gateway --config /etc/gateway/bootstrap.yaml --check (as gateway)" \
    bash -c "chroot --userspec=gateway:gateway '$rootfs' /usr/bin/gateway --config /etc/gateway/bootstrap.yaml --check >'$work/check.log' 2>&1"

# --- Run it -------------------------------------------------------------

# Its own network namespace (loopback only): the default bootstrap's ports
# cannot clash with anything on this host, and the chroot's processes and
# curl (this host's) meet there. The hot restart's abstract socket lives in
# it too.
ip netns add "$netns"
ip netns exec "$netns" ip link set lo up
# The prefix that runs a command in the namespace, in the chroot, as the
# user gateway, with the unit's limits where this host lets root raise them
# (unlimited locked memory for io_uring; else glommio warns that it skips
# registering buffers, and runs). Every step execs, so "${as_service[@]}"
# CMD & leaves the command's own pid in $! (a shell function would not).
# shellcheck disable=SC2016 # expanded by the inner bash
as_service=(ip netns exec "$netns" bash -c '
    ulimit -l unlimited 2>/dev/null || ulimit -l "$(ulimit -Hl)"
    ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    exec "$@"' _ chroot --userspec=gateway:gateway "$rootfs")
ns_curl() { ip netns exec "$netns" curl -sS --max-time 3 "$@"; }
# wait_for SECONDS COMMAND...: polls the command every 0.1 s.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}
# wait_exit SECONDS PID: waits for a child of this shell to exit and sets
# $status to its exit status; 124 when it is still there at the deadline.
# (Not in $(...): a subshell cannot wait for this shell's children.)
wait_exit() {
    local deadline=$((SECONDS + $1))
    while kill -0 "$2" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            status=124
            return
        fi
        sleep 0.1
    done
    status=0
    wait "$2" || status=$?
}
nothing_runs() { [ -z "$(ip netns pids "$netns")" ]; }
ready() { [ "$(ns_curl "http://127.0.0.1:$ADMIN/ready")" = LIVE ]; }
serving() { [ "$(ns_curl "http://127.0.0.1:$LISTENER/")" = "gateway is running" ]; }

echo "== gateway --config /etc/gateway/bootstrap.yaml --shards 1 (as gateway, in the chroot)"
"${as_service[@]}" /usr/bin/gateway --config /etc/gateway/bootstrap.yaml --shards 1 --drain-time-s 2 \
    >"$work/gateway.log" 2>&1 &
gw=$!
pids+=("$gw")
if wait_for 20 ready; then pass "admin /ready says LIVE"; else
    fail "admin /ready says LIVE within 20 s"
    cat "$work/gateway.log"
fi
body=$(ns_curl "http://127.0.0.1:$LISTENER/" || true)
check "listener :$LISTENER answers 'gateway is running' (HTTP/1.1)" [ "$body" = "gateway is running" ]
body=$(ns_curl --http2-prior-knowledge "http://127.0.0.1:$LISTENER/" || true)
check "listener :$LISTENER answers over h2c" [ "$body" = "gateway is running" ]
check "admin listens on loopback only" \
    bash -c "ip netns exec '$netns' ss -Hltn 'sport = :$ADMIN' | grep -q '127.0.0.1:$ADMIN'"
uid=$(in_root id -u gateway)
check "runs as user gateway (uid $uid)" bash -c "[ \"\$(stat -c %u /proc/$gw)\" = $uid ]"
kill -TERM "$gw"
wait_exit 15 "$gw"
check "SIGTERM: drained and exited 0 (status $status)" [ "$status" = 0 ]
check "nothing left running" nothing_runs

echo "== gateway-restarter /usr/bin/gateway ... --base-id 0, SIGHUP under traffic"
check "nothing runs before the restarter" nothing_runs
"${as_service[@]}" /usr/bin/gateway-restarter /usr/bin/gateway --config /etc/gateway/bootstrap.yaml \
    --base-id 0 --shards 1 --drain-time-s 2 --parent-shutdown-time-s 10 >"$work/restarter.log" 2>&1 &
rs=$!
pids+=("$rs")
if wait_for 20 ready; then pass "epoch 0 under gateway-restarter is LIVE"; else
    fail "epoch 0 under gateway-restarter is LIVE within 20 s"
    cat "$work/restarter.log"
fi
# The newest gateway under the restarter.
newest() { pgrep -P "$rs" -n; }
epoch0=$(newest || true)
check "epoch 0 (pid ${epoch0:-none}) runs with RESTART_EPOCH=0" \
    bash -c "tr '\\0' '\\n' </proc/${epoch0:-0}/environ | grep -qx RESTART_EPOCH=0"
# One request after the other, each on a new connection, until the file
# $work/stop appears: every one must be answered.
load() {
    local ok=0 bad=0 deadline=$((SECONDS + 30))
    rm -f "$work/stop"
    while [ ! -e "$work/stop" ] && [ "$SECONDS" -lt "$deadline" ]; do
        if serving; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    done
    echo "$ok $bad" >"$work/load.result"
}
# under_load TITLE COMMAND...: runs the command while load() runs.
under_load() {
    local title=$1 ok bad
    shift
    load &
    local l=$!
    pids+=("$l")
    sleep 1
    "$@"
    sleep 1
    touch "$work/stop"
    wait_exit 15 "$l"
    read -r ok bad <"$work/load.result" || { ok=0 bad=1; }
    check "$title: $ok requests answered, $bad failed" test "$status" = 0 -a "$ok" -gt 0 -a "$bad" = 0
}
hot_restart() {
    kill -HUP "$rs"
    if wait_for 20 grep -q "hot restart: took over from process $epoch0" "$work/restarter.log"; then
        pass "SIGHUP: epoch 1 took over from epoch 0 (pid $epoch0)"
    else
        fail "SIGHUP: epoch 1 took over within 20 s"
        cat "$work/restarter.log"
    fi
    if wait_for 15 bash -c "! kill -0 $epoch0 2>/dev/null"; then
        pass "epoch 0 drained and exited"
    else
        fail "epoch 0 exited within 15 s"
    fi
}
under_load "across the hot restart" hot_restart
epoch1=$(newest || true)
check "epoch 1 (pid ${epoch1:-none}) runs with RESTART_EPOCH=1" \
    bash -c "tr '\\0' '\\n' </proc/${epoch1:-0}/environ | grep -qx RESTART_EPOCH=1"
check "gateway-restarter still runs" kill -0 "$rs"

# A reload onto a broken bootstrap: the new epoch exits 2, the running one
# serves on. Then the bootstrap is mended and reloaded again.
bad_reload() {
    cp "$rootfs/etc/gateway/bootstrap.yaml" "$work/bootstrap.good"
    echo "not_a_bootstrap_field: 1" >>"$rootfs/etc/gateway/bootstrap.yaml"
    kill -HUP "$rs"
    if wait_for 20 grep -q "failed with exit status: 2; the previous epoch keeps serving" "$work/restarter.log"; then
        pass "SIGHUP with a broken bootstrap: the new epoch failed (exit 2)"
    else
        fail "SIGHUP with a broken bootstrap: the new epoch failed within 20 s"
        cat "$work/restarter.log"
    fi
    check "the running epoch (pid $epoch1) serves on" kill -0 "$epoch1"
    cp "$work/bootstrap.good" "$rootfs/etc/gateway/bootstrap.yaml"
}
under_load "across a failed reload" bad_reload
failed_before=$(grep -c "failed with exit status" "$work/restarter.log" || true)
took_over_or_failed() {
    grep -q "hot restart: took over from process $epoch1" "$work/restarter.log" ||
        [ "$(grep -c "failed with exit status" "$work/restarter.log")" -gt "$failed_before" ]
}
kill -HUP "$rs"
wait_for 20 took_over_or_failed || true
# Known gaps, by name, reported instead of failing (none now; the slot
# stays for the next one): KNOWN_GAPS="reload-after-failed-reload" would
# report this check rather than fail it.
KNOWN_GAPS=${KNOWN_GAPS-}
title="SIGHUP after mending the bootstrap: a new epoch took over from epoch 1 (pid $epoch1)"
if grep -q "hot restart: took over from process $epoch1" "$work/restarter.log"; then
    pass "$title"
    if [[ " $KNOWN_GAPS " == *" reload-after-failed-reload "* ]]; then
        echo "NOTE: reload-after-failed-reload passes: take it out of KNOWN_GAPS"
    fi
elif [[ " $KNOWN_GAPS " == *" reload-after-failed-reload "* ]]; then
    echo "KNOWN GAP (reload-after-failed-reload): $title: no;"
    grep -m1 "no running gateway answers" "$work/restarter.log" | sed 's/^/  /' || true
else
    fail "$title"
    tail -5 "$work/restarter.log"
fi
check "still serving" serving

kill -TERM "$rs"
wait_exit 20 "$rs"
check "SIGTERM to gateway-restarter: all drained, it exited 0 (status $status)" [ "$status" = 0 ]
check "nothing left running" nothing_runs
grep -E 'gateway-restarter|hot restart: took over|draining and stopping' "$work/restarter.log" |
    sed 's/^/  restarter| /' || true

# --- Upgrade -------------------------------------------------------------

echo "== dpkg -i again over the installed package (the upgrade path), with the bootstrap edited"
echo "# edited by the admin" >>"$rootfs/etc/gateway/bootstrap.yaml"
in_root dpkg -i "/tmp/$debname" >"$work/dpkg-upgrade.log" 2>&1 ||
    { cat "$work/dpkg-upgrade.log"; fail "dpkg -i over the installed package"; }
check "upgrade: the admin's bootstrap kept" grep -qx "# edited by the admin" "$rootfs/etc/gateway/bootstrap.yaml"
check "upgrade: one user gateway still" bash -c "[ \"\$(chroot '$rootfs' getent passwd gateway | wc -l)\" = 1 ]"
check "upgrade: package installed (ii)" \
    bash -c "chroot '$rootfs' dpkg-query -W -f='\${db:Status-Abbrev}' gateway | grep -q '^ii'"

# --- Remove, purge ------------------------------------------------------

echo "== dpkg -r gateway, then dpkg --purge gateway"
in_root dpkg -r gateway >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r gateway"; }
check "removed: binaries gone" test ! -e "$rootfs/usr/bin/gateway" -a ! -e "$rootfs/usr/bin/gateway-restarter"
check "removed: unit gone" test ! -e "$rootfs/lib/systemd/system/gateway.service"
check "removed: conffile kept until purge" test -f "$rootfs/etc/gateway/bootstrap.yaml"
in_root dpkg --purge gateway >"$work/dpkg-purge.log" 2>&1 || { cat "$work/dpkg-purge.log"; fail "dpkg --purge gateway"; }
check "purged: /etc/gateway gone" test ! -e "$rootfs/etc/gateway"
check "purged: /var/log/gateway gone" test ! -e "$rootfs/var/log/gateway"
check "purged: unknown to dpkg" bash -c "! chroot '$rootfs' dpkg-query -W gateway >/dev/null 2>&1"
check "purged: /usr/share/doc/gateway gone" test ! -e "$rootfs/usr/share/doc/gateway"
# Kept on purpose, as Debian keeps system users (deluser --system gateway).
check "purged: system user gateway kept" bash -c "chroot '$rootfs' getent passwd gateway >/dev/null"

# --- The unit under systemd ---------------------------------------------

# The same root, booted with systemd in systemd-nspawn (its own network):
# the package installed on a running systemd (postinst's daemon-reload),
# the hardened unit started, reloaded under traffic, reloaded with a
# broken bootstrap, stopped, and the package purged while running
# (prerm stops it). PACKAGE_SKIP_SYSTEMD=1 skips this part.
systemd_stage() {
    if ! command -v systemd-nspawn >/dev/null; then
        apt-get install -y -q --no-install-recommends systemd-container >/dev/null 2>&1 || true
    fi
    if ! command -v systemd-nspawn >/dev/null; then
        echo "SKIP: the unit under systemd: no systemd-nspawn (apt-get install systemd-container)"
        return
    fi
    echo "== the unit under systemd: apt-get install systemd in the root, boot it with systemd-nspawn"
    if ! timeout 300 chroot "$rootfs" apt-get update -q >"$work/apt-systemd.log" 2>&1 ||
        ! timeout 300 chroot "$rootfs" apt-get install -y -q --no-install-recommends \
            systemd systemd-sysv procps >>"$work/apt-systemd.log" 2>&1; then
        tail -20 "$work/apt-systemd.log"
        fail "apt-get install systemd in the root"
        return
    fi
    # nspawn mounts /proc, /sys and /dev itself.
    for m in "$rootfs/dev" "$rootfs/sys" "$rootfs/proc"; do umount "$m"; done
    mounts=("$work")
    rm -f "$rootfs/etc/resolv.conf"
    timeout 300 systemd-nspawn -q -b -D "$rootfs" --private-network --register=no --keep-unit \
        --machine "$netns" >"$work/nspawn.log" 2>&1 &
    local t=$! np='' init='' deadline=$((SECONDS + 30))
    pids+=("$t")
    while [ -z "$init" ] && [ "$SECONDS" -lt "$deadline" ] && kill -0 "$t" 2>/dev/null; do
        np=$(pgrep -P "$t" || true)
        [ -n "$np" ] && init=$(pgrep -P "$np" || true)
        sleep 0.2
    done
    if [ -z "$init" ]; then
        echo "SKIP: the unit under systemd: systemd-nspawn cannot boot here:"
        sed 's/^/  nspawn| /' "$work/nspawn.log" | tail -5
        return
    fi
    pids+=("$init")
    local ct=(nsenter -t "$init" -a)        # in the container
    local net=(nsenter -t "$init" -n)       # this host's tools in its network
    state=$(timeout 60 "${ct[@]}" systemctl is-system-running --wait 2>/dev/null || true)
    check "systemd booted in the root ($state)" test "$state" = running -o "$state" = degraded
    cp "$deb" "$rootfs/root/"
    "${ct[@]}" dpkg -i "/root/$debname" >"$work/dpkg-systemd.log" 2>&1 ||
        { cat "$work/dpkg-systemd.log"; fail "dpkg -i on the running systemd"; }
    check "systemd knows the unit (postinst: daemon-reload)" \
        bash -c "[ \"\$(${ct[*]} systemctl show -p LoadState --value gateway)\" = loaded ]"
    check "systemd-analyze verify gateway.service" \
        "${ct[@]}" systemd-analyze verify /lib/systemd/system/gateway.service
    "${ct[@]}" systemd-analyze security gateway --no-pager 2>/dev/null | tail -1 | sed 's/^/  /' || true
    check "unit not enabled by the package" \
        bash -c "[ \"\$(${ct[*]} systemctl is-enabled gateway 2>/dev/null)\" = disabled ]"
    "${ct[@]}" systemctl enable --now gateway >"$work/enable.log" 2>&1 ||
        { cat "$work/enable.log"; fail "systemctl enable --now gateway"; }
    svc_ready() { [ "$("${net[@]}" curl -sS --max-time 3 "http://127.0.0.1:$ADMIN/ready")" = LIVE ]; }
    svc_serving() { [ "$("${net[@]}" curl -sS --max-time 3 "http://127.0.0.1:$LISTENER/")" = "gateway is running" ]; }
    if wait_for 20 svc_ready; then pass "systemctl enable --now gateway: LIVE"; else
        fail "systemctl enable --now gateway: LIVE within 20 s"
        "${ct[@]}" journalctl -u gateway --no-pager | tail -20
    fi
    check "the hardened unit serves 'gateway is running'" svc_serving
    local main uid
    main=$("${ct[@]}" systemctl show -p MainPID --value gateway)
    uid=$("${ct[@]}" id -u gateway)
    check "its processes run as gateway (uid $uid)" \
        bash -c "[ -n \"\$(${ct[*]} pgrep -u $uid -x gateway)\" ] && [ -z \"\$(${ct[*]} pgrep -u 0 -x gateway)\" ]"
    journal() { "${ct[@]}" journalctl -u gateway --no-pager -o cat; }
    svc_reload() {
        "${ct[@]}" systemctl reload gateway
        wait_for 20 bash -c "${ct[*]} journalctl -u gateway --no-pager -o cat | grep -q 'hot restart: took over from process'"
    }
    load_svc() {
        local ok=0 bad=0 deadline=$((SECONDS + 30))
        rm -f "$work/stop"
        while [ ! -e "$work/stop" ] && [ "$SECONDS" -lt "$deadline" ]; do
            if svc_serving; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
        done
        echo "$ok $bad" >"$work/load.result"
    }
    load_svc &
    local l=$! ok bad
    pids+=("$l")
    sleep 1
    check "systemctl reload gateway: a new epoch took over" svc_reload
    sleep 1
    touch "$work/stop"
    wait_exit 15 "$l"
    read -r ok bad <"$work/load.result" || { ok=0 bad=1; }
    check "across systemctl reload: $ok requests answered, $bad failed" test "$status" = 0 -a "$ok" -gt 0 -a "$bad" = 0
    check "MainPID unchanged across the reload ($main)" \
        bash -c "[ \"\$(${ct[*]} systemctl show -p MainPID --value gateway)\" = $main ]"
    cp "$rootfs/etc/gateway/bootstrap.yaml" "$work/bootstrap.good"
    echo "not_a_bootstrap_field: 1" >>"$rootfs/etc/gateway/bootstrap.yaml"
    check "systemctl reload with a broken bootstrap fails (ExecReload's --check)" \
        bash -c "! ${ct[*]} systemctl reload gateway 2>/dev/null"
    cp "$work/bootstrap.good" "$rootfs/etc/gateway/bootstrap.yaml"
    check "the gateway serves on, active" bash -c "[ \"\$(${ct[*]} systemctl is-active gateway)\" = active ]"
    check "it still answers" svc_serving
    # The last epoch, reloaded again now that the bootstrap is mended.
    local before
    before=$(journal | grep -c 'hot restart: took over from process' || true)
    "${ct[@]}" systemctl reload gateway || true
    check "reload after the mended bootstrap: another epoch took over" \
        wait_for 20 bash -c "[ \"\$(${ct[*]} journalctl -u gateway --no-pager -o cat | grep -c 'hot restart: took over from process')\" -gt $before ]"
    "${ct[@]}" systemctl stop gateway
    check "systemctl stop: inactive, exit status 0" \
        bash -c "[ \"\$(${ct[*]} systemctl show -p ActiveState --value gateway)\" = inactive ] && [ \"\$(${ct[*]} systemctl show -p ExecMainStatus --value gateway)\" = 0 ]"
    "${ct[@]}" systemctl start gateway
    wait_for 20 svc_ready || true
    "${ct[@]}" dpkg --purge gateway >"$work/purge-systemd.log" 2>&1 ||
        { cat "$work/purge-systemd.log"; fail "dpkg --purge on the running systemd"; }
    check "purge stopped the service (prerm), nothing listens" bash -c "! ${net[*]} curl -s --max-time 2 http://127.0.0.1:$LISTENER/ >/dev/null"
    check "purge: systemd forgot the unit, enable link gone" \
        bash -c "[ \"\$(${ct[*]} systemctl show -p LoadState --value gateway)\" = not-found ] && [ ! -e '$rootfs/etc/systemd/system/multi-user.target.wants/gateway.service' ]"
    journal | grep -E 'gateway-restarter:|hot restart: took over|error:' | sed 's/^/  journal| /' || true
    "${ct[@]}" systemctl poweroff >/dev/null 2>&1 || true
    wait_exit 30 "$t"
    check "the container powered off" test "$status" = 0
}
if [ -z "${PACKAGE_SKIP_SYSTEMD:-}" ]; then
    systemd_stage
fi

elapsed=$(($(date +%s) - started))
if [ "$failures" -ne 0 ]; then
    die "$failures check(s) failed ($elapsed s)"
fi
echo "== package.sh: PASS ($elapsed s)"
