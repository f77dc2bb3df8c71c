#!/usr/bin/env bash
# One install path for p4lb, used by `make deps` natively and by the Vagrant VM.
# Idempotent: a re-run with everything present changes nothing and fetches nothing.
#
# 1. Distribution packages: Mininet, ApacheBench, tcpdump, nftables (keeps BMv2's Thrift port
#    off the network), openssl (the throwaway CA of `make run`), sudo where it is missing (the
#    README's commands use it), ... and a Python >= 3.11 (python3.11 + python3.11-venv where
#    the distribution's python3 is older, as on Ubuntu 22.04).
# 1b. The tier's engines, FRR (frr: its routers) and GoBGP (gobgpd: each balancer's speaker),
#    installed with a policy-rc.d that lets no package start a service; the services a fresh
#    install enabled are disabled again: the tier starts its own daemons in its namespaces.
# 2. p4c and BMv2 (simple_switch_grpc), first route that works:
#      a. already installed (found on PATH: packages, or a source build in /usr/local)
#      b. home:p4lang:latest, p4lang's maintained packages (Ubuntu 22.04, x86_64)
#      c. home:p4lang, the older project (flaky mirrors, only the newest revision kept;
#         Ubuntu and Debian trees: a release it does not publish answers 404 at once)
#      d. the source route, scripts/build-from-source.sh: PI, BMv2 and p4c built from p4lang's
#         repositories at the commits pinned in scripts/toolchain.env (about 75 min on 2 cores;
#         resumable). P4LB_FROM_SOURCE=1 goes straight to it.
#    Transient repository errors (403, 5xx, timeouts, "Mirror sync in progress") are retried
#    with backoff; a route that does not publish for this system is skipped at once. Every
#    route's result is checked against the minimum versions in scripts/toolchain.env: a route
#    that gives an older p4c or BMv2 (home:p4lang still carries p4c 1.2.4.8) counts as failed.
# 3. k6 (seed 001's load shapes), the version pinned in scripts/toolchain.env: k6's own apt
#    repository, else `go install` where Go is installed.
# 4. .venv with the p4lb package, built with that Python; then /usr/local/bin/p4lb, two lines
#    that exec .venv/bin/p4lb, so `sudo p4lb stats` works (sudo's secure_path has /usr/local/bin;
#    to uninstall, remove that file).
# 5. The versions now installed and the next command; exit 2 (everything else installed)
#    with one message naming what is missing and what to do when no route gave p4c and BMv2.
#
# Overridable by environment (the defaults are what a user wants; tests point them elsewhere):
#   P4LB_OS_RELEASE       os-release file to read ID / VERSION_ID from  (/etc/os-release)
#   P4LB_REPO_LATEST      base URL of home:p4lang:latest, P4LB_REPO_LATEST_DISTS where it publishes
#   P4LB_REPO_OLD         base URL of home:p4lang
#   P4LB_APT_SOURCES_DIR  where the apt source lines go        (apt's Dir::Etc::sourceparts)
#   P4LB_KEYRING_DIR      where the repository keys go         (/etc/apt/keyrings)
#   P4LB_RETRIES          tries per route on transient errors  (4)
#   P4LB_BACKOFF          seconds before the first retry, doubled each time (5)
#   P4LB_TIMEOUT          seconds before a repository request counts as timed out (30)
#   P4LB_TOOL_PATH        PATH searched for the installed tools ($PATH)
#   P4LB_DISTRO_PKGS      distribution packages besides Python (space-separated; default below)
#   P4LB_TIER_PKGS        the tier's engines ("frr gobgpd"; "" to skip them)
#   P4LB_POLICY_RC_D      the policy-rc.d put in place while they install (/usr/sbin/policy-rc.d)
#   P4LB_SYSTEMCTL        systemctl, to disable the services their install enabled (systemctl)
#   P4LB_WRAPPER          where the p4lb command goes           (/usr/local/bin/p4lb)
#   P4LB_VENV=0           skip building .venv
#   P4LB_NEXT             the next command to print           (make run)
#   P4LB_FROM_SOURCE=1    skip the package routes: build from source
#   P4LB_SOURCE_ROUTE     the command that is the source route (bash scripts/build-from-source.sh;
#                         its own variables, P4LB_PREFIX, P4LB_GIT_BASE, ..., pass through)
#   P4LB_K6_APT           k6's apt repository, "" to skip it    (https://dl.k6.io/deb)
#   P4LB_GO               the go command for `go install` of k6  (go)
#   P4LB_K6=0             skip k6
#   P4LB_CHROMIUM=0       skip chromium (optional: the stats page's browser test)
#   P4LB_TOOLCHAIN_ENV    the minimum versions and pins        (scripts/toolchain.env)
# apt itself honours APT_CONFIG, so tests can run all of this against a throwaway root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1090 # plain KEY=value lines: the minimums and pins
. "${P4LB_TOOLCHAIN_ENV:-$ROOT/scripts/toolchain.env}"
OS_RELEASE="${P4LB_OS_RELEASE:-/etc/os-release}"
# The key is fetched over https; apt uses http, as the build service documents (its mirrors
# redirect to http, and apt verifies every index against the key anyway).
REPO_LATEST="${P4LB_REPO_LATEST:-https://download.opensuse.org/repositories/home:/p4lang:/latest}"
REPO_LATEST_DISTS="${P4LB_REPO_LATEST_DISTS:-xUbuntu_22.04}"
REPO_OLD="${P4LB_REPO_OLD:-https://download.opensuse.org/repositories/home:/p4lang}"
KEYRING_DIR="${P4LB_KEYRING_DIR:-/etc/apt/keyrings}"
RETRIES="${P4LB_RETRIES:-4}"
BACKOFF="${P4LB_BACKOFF:-5}"
TIMEOUT="${P4LB_TIMEOUT:-30}"
TOOL_PATH="${P4LB_TOOL_PATH:-$PATH}"
NEXT="${P4LB_NEXT:-make run}"
FROM_SOURCE="${P4LB_FROM_SOURCE:-0}"
if [ -n "${P4LB_SOURCE_ROUTE:-}" ]; then
    read -r -a SOURCE_ROUTE <<<"$P4LB_SOURCE_ROUTE"
else
    SOURCE_ROUTE=(bash "$ROOT/scripts/build-from-source.sh")
fi
K6_APT="${P4LB_K6_APT-https://dl.k6.io/deb}"
GO="${P4LB_GO:-go}"
P4_PKGS=(p4lang-p4c p4lang-bmv2 p4lang-pi)
P4_TOOLS=(p4c p4c-bm2-ss simple_switch_grpc)
OTHER_TOOLS=(mn ab tcpdump)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
TMP="$(mktemp -d)"
POLICY_RC_D="${P4LB_POLICY_RC_D:-/usr/sbin/policy-rc.d}"
OUR_POLICY=0 # 1 while the policy-rc.d in place is ours (removed on any exit)
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    if [ "$OUR_POLICY" -eq 1 ]; then $SUDO rm -f "$POLICY_RC_D"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

log() { printf 'deps: %s\n' "$*"; }
have() { PATH="$TOOL_PATH" command -v "$1" >/dev/null 2>&1; }
# The first version-looking word a tool prints about itself.
version_of() {
    local out
    out=$(PATH="$TOOL_PATH" "$@" 2>&1 || true)
    grep -Eo '[0-9]+(\.[0-9]+)+[^ ,)]*' <<<"$out" | head -1 | grep . || echo "?"
}
py_ok() { "$@" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
# 1.2.5 >= 1.2.5 and 1.15.5 >= 1.15.0 (a "-1" or "-source" after the numbers is ignored).
ver_ge() { [ "$(printf '%s\n%s\n' "${2%%[-+~ ]*}" "${1%%[-+~ ]*}" | sort -V | head -1)" = "${2%%[-+~ ]*}" ]; }

ID="" VERSION_ID="" PRETTY_NAME=""
if [ -r "$OS_RELEASE" ]; then
    # shellcheck disable=SC1090
    . "$OS_RELEASE"
fi
SYSTEM="${PRETTY_NAME:-${ID:-unknown} ${VERSION_ID:-}}"
log "system: $SYSTEM"

HAVE_APT=0
if command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then
    HAVE_APT=1
    eval "$(apt-config shell DPKG_STATUS Dir::State::status/f APT_PARTS Dir::Etc::sourceparts/d)"
    SOURCES_DIR="${P4LB_APT_SOURCES_DIR:-${APT_PARTS:-/etc/apt/sources.list.d/}}"
    DPKG_ADMIN="$(dirname "${DPKG_STATUS:-/var/lib/dpkg/status}")"
fi

apt_get() { $SUDO apt-get "$@"; }
all_installed() {
    local p
    for p in "$@"; do
        dpkg-query --admindir="$DPKG_ADMIN" -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null |
            grep -q '^ii' || return 1
    done
}

# 1. The distribution's own packages, and a Python >= 3.11 for .venv.
if py_ok env PATH="$TOOL_PATH" python3; then
    PY=python3
    PY_PKGS=(python3 python3-venv)
else
    PY=python3.11
    PY_PKGS=(python3.11 python3.11-venv)
fi
read -r -a DISTRO_PKGS <<<"${P4LB_DISTRO_PKGS:-make git curl gnupg ca-certificates mininet \
apache2-utils tcpdump tcpreplay ethtool iproute2 iputils-ping shellcheck nftables openssl} ${PY_PKGS[*]}"
if [ "$HAVE_APT" -eq 1 ] && ! have sudo; then
    log "sudo is missing: adding it (the README's commands run through it: sudo make run, sudo p4lb)"
    DISTRO_PKGS+=(sudo)
fi
UPDATED=0
if [ "$HAVE_APT" -eq 0 ]; then
    log "no apt-get here: install Mininet, ab, tcpdump and Python >= 3.11 yourself"
elif all_installed "${DISTRO_PKGS[@]}"; then
    log "distribution packages already installed"
else
    log "installing distribution packages: ${DISTRO_PKGS[*]}"
    apt_get update -qq || log "apt-get update reported errors (above); going on"
    UPDATED=1
    if ! apt_get install -y -qq --no-install-recommends "${DISTRO_PKGS[@]}" >/dev/null; then
        log "FAILED: apt-get could not install the distribution packages above; fix apt and re-run"
        exit 1
    fi
fi

# 1b. The tier's engines: FRR (zebra, bgpd, bfdd: the tier's routers) and GoBGP (each
# balancer's BGP speaker). No package may start a service: a policy-rc.d of ours forbids it
# while they install (one already in place is left as it is), and the services a fresh install
# enabled are disabled, so nothing of theirs runs in this host's own namespace, now or at boot.
read -r -a TIER_PKGS <<<"${P4LB_TIER_PKGS-frr gobgpd}"
SYSTEMCTL="${P4LB_SYSTEMCTL:-systemctl}"
if [ "${#TIER_PKGS[@]}" -eq 0 ] || [ "$HAVE_APT" -eq 0 ]; then
    :
elif all_installed "${TIER_PKGS[@]}"; then
    log "the tier's engines already installed: ${TIER_PKGS[*]}"
else
    log "installing ${TIER_PKGS[*]}: the tier's engines (FRR routes to the balancers, GoBGP" \
        "announces each one; make run TOPO=tier and its tests start them in namespaces)"
    [ "$UPDATED" -eq 1 ] || apt_get update -qq || log "apt-get update reported errors (above); going on"
    UPDATED=1
    if [ ! -e "$POLICY_RC_D" ]; then
        printf '#!/bin/sh\n# p4lb install-deps.sh: no service starts while packages install\nexit 101\n' \
            >"$TMP/policy-rc.d"
        $SUDO install -D -m 0755 "$TMP/policy-rc.d" "$POLICY_RC_D"
        OUR_POLICY=1
    fi
    if apt_get install -y -qq --no-install-recommends "${TIER_PKGS[@]}" >/dev/null; then
        if PATH="$TOOL_PATH:$PATH" command -v "$SYSTEMCTL" >/dev/null 2>&1; then
            for pkg in "${TIER_PKGS[@]}"; do
                $SUDO "$SYSTEMCTL" disable --now "${pkg}.service" >/dev/null 2>&1 || true
            done
            log "${TIER_PKGS[*]}: their system services are disabled (the tier runs its own daemons)"
        fi
    else
        NOTES+=("${TIER_PKGS[*]}: apt-get could not install them (the tier's tests will skip, naming them)")
    fi
    if [ "$OUR_POLICY" -eq 1 ]; then
        $SUDO rm -f "$POLICY_RC_D"
        OUR_POLICY=0
    fi
fi

# 2. p4c and BMv2.
# What a failed repository step printed, sorted: transient (worth retrying), missing (this
# route does not publish it), or fatal. A .deb that 404s means the index is ahead of the
# mirror (home:p4lang keeps only the newest revision): transient, the next try re-reads it.
TRANSIENT='[[:space:]](403|408|429|5[0-9]{2})[[:space:]]+[[:alpha:]]|Mirror sync in progress'
TRANSIENT+='|unexpected size|Hash Sum mismatch|timed out|Connection (failed|reset|refused)'
TRANSIENT+='|Failed to connect|Could not connect|Undetermined Error'
MISSING='[[:space:]](404|410)[[:space:]]+[[:alpha:]]|does not have a Release file'
MISSING+='|Unable to locate package|has no installation candidate'
classify() {
    if grep -Eqi 'Failed to fetch [^ ]*\.deb +404' <<<"$1"; then echo transient
    elif grep -Eqi "$TRANSIENT" <<<"$1"; then echo transient
    elif grep -Eqi "$MISSING" <<<"$1"; then echo missing
    else echo fatal
    fi
}
first_error() {
    awk '/^E: /         { e = e ? e : $0 }
         /^W: /         { w = w ? w : $0 }
         err == 1       { err = $0; sub(/^ +/, " ", err) }
         /^Err:/ && !err { err = 1; first = $0 }
         NF && !any     { any = $0 }
         END { print (e ? e : w ? w : err ? first err : any) }' <<<"$1" | cut -c1-200
}

# One try of one route: key, source line, index, packages. Sets OUT (what failed) and returns
# 0 (installed) or 1.
route_once() {
    local name=$1 base=$2 dist=$3 key="$TMP/Release.key" code
    local keyring="${KEYRING_DIR%/}/${name}.gpg" list="${SOURCES_DIR%/}/${name}.list"
    local line="deb [signed-by=${keyring}] ${base/#https:/http:}/${dist}/ /"
    OUT=""
    if ! code=$(curl -sS -L --max-time "$TIMEOUT" -o "$key" -w '%{http_code}' \
        "${base}/${dist}/Release.key" 2>"$TMP/curl.err"); then
        OUT="Release.key: $(cat "$TMP/curl.err")"
        return 1
    fi
    if [ "$code" != 200 ]; then
        OUT="Release.key: HTTP  $code  $(http_reason "$code")"
        return 1
    fi
    GNUPGHOME="$TMP" gpg --batch --yes --quiet --dearmor -o "$TMP/key.gpg" "$key" 2>/dev/null ||
        { OUT="Release.key is not an OpenPGP key"; return 1; }
    if ! cmp -s "$TMP/key.gpg" "$keyring"; then
        $SUDO install -d -m 0755 "$KEYRING_DIR"
        $SUDO install -m 0644 "$TMP/key.gpg" "$keyring"
    fi
    if [ "$(cat "$list" 2>/dev/null)" != "$line" ]; then
        $SUDO install -d -m 0755 "$SOURCES_DIR"
        printf '%s\n' "$line" >"$TMP/src.list"
        $SUDO install -m 0644 "$TMP/src.list" "$list"
    fi
    # Read this repository's index only; apt's own retries are off, the loop below retries.
    OUT=$(apt_get update -q -o Acquire::Retries=0 -o Acquire::http::Timeout="$TIMEOUT" \
        -o Acquire::Languages=none -o Dir::Etc::sourcelist="$list" \
        -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 2>&1) || return 1
    if grep -Eq '^(E:|W: Failed to fetch|W: Some index files failed)' <<<"$OUT"; then return 1; fi
    OUT=$(apt_get install -y -q --no-install-recommends -o Acquire::Retries=0 \
        -o Acquire::http::Timeout="$TIMEOUT" "${P4_PKGS[@]}" 2>&1) || return 1
}
http_reason() {
    case $1 in
        403) echo Forbidden ;; 404) echo Not Found ;; 410) echo Gone ;;
        503) echo Service Unavailable ;; 5??) echo Server Error ;; *) echo "HTTP error" ;;
    esac
}
# Remove what a failed route wrote, so a later `apt-get update` does not trip over it.
route_forget() {
    $SUDO rm -f "${SOURCES_DIR%/}/$1.list" "${KEYRING_DIR%/}/$1.gpg"
}
# Try a route up to RETRIES times on transient errors. Appends to NOTES why it failed.
try_route() {
    local name=$1 label=$2 base=$3 dist=$4 try=1 wait=$BACKOFF kind
    log "trying ${label} (${dist}): ${base}/${dist}/"
    if [ "$UPDATED" -eq 0 ]; then
        # The p4lang packages depend on distribution libraries: their index must be current.
        apt_get update -qq || log "apt-get update reported errors (above); going on"
        UPDATED=1
    fi
    while :; do
        if route_once "$name" "$base" "$dist"; then
            log "installed ${P4_PKGS[*]} from ${label}"
            return 0
        fi
        kind=$(classify "$OUT")
        if [ "$kind" != transient ] || [ "$try" -ge "$RETRIES" ]; then
            [ "$kind" = transient ] && kind="transient, gave up after $try tries"
            NOTES+=("${label} (${dist}): ${kind}: $(first_error "$OUT")")
            log "${label} failed (${kind}): $(first_error "$OUT")"
            route_forget "$name"
            return 1
        fi
        log "${label}: transient error ($(first_error "$OUT"));" \
            "try $((try + 1))/${RETRIES} in ${wait} s"
        sleep "$wait"
        try=$((try + 1))
        wait=$((wait * 2))
    done
}

NOTES=()
missing_p4() {
    local t
    for t in "${P4_TOOLS[@]}"; do have "$t" || printf '%s ' "$t"; done
}
# The P4 toolchain on TOOL_PATH against the minimums in scripts/toolchain.env. Prints what is
# too old (nothing when all is well); PI is checked where a package says its version.
p4_too_old() {
    local v old=()
    v=$(version_of p4c --version)
    ver_ge "$v" "$P4LB_MIN_P4C" || old+=("p4c $v (needs >= $P4LB_MIN_P4C)")
    v=$(version_of simple_switch_grpc --version)
    ver_ge "$v" "$P4LB_MIN_BMV2" || old+=("simple_switch_grpc $v (needs >= $P4LB_MIN_BMV2)")
    if [ "$HAVE_APT" -eq 1 ] &&
        v=$(dpkg-query --admindir="$DPKG_ADMIN" -W -f='${Version}' p4lang-pi 2>/dev/null) &&
        [ -n "$v" ] && ! ver_ge "$v" "$P4LB_MIN_PI"; then
        old+=("p4lang-pi $v (needs >= $P4LB_MIN_PI)")
    fi
    [ "${#old[@]}" -eq 0 ] || { v=$(printf '%s, ' "${old[@]}"); echo "${v%, }"; }
}
# p4c and BMv2 present and new enough: 0. Else 1, with why in WHY.
p4_ok() {
    local m
    m=$(missing_p4)
    if [ -n "$m" ]; then WHY="missing ${m% }"; return 1; fi
    WHY=$(p4_too_old)
    [ -z "$WHY" ] || { WHY="too old: $WHY"; return 1; }
}
# A package route that installed, checked: an older p4c than p4lb needs counts as a failure.
route_checked() {
    local label=$1
    shift
    try_route "$@" || return 1
    if ! p4_ok; then
        NOTES+=("${label}: installed, but ${WHY}")
        log "${label} gave a toolchain that is ${WHY}; going on"
        return 1
    fi
}
source_route() {
    log "source route: ${SOURCE_ROUTE[*]}"
    if ! "${SOURCE_ROUTE[@]}"; then
        NOTES+=("the source route failed (its message is above); 'make deps' again resumes it")
        return 1
    fi
    if ! p4_ok; then
        NOTES+=("the source route finished, but p4c and BMv2 on PATH are ${WHY}")
        return 1
    fi
    log "installed p4c and BMv2 from source"
}

if [ "$FROM_SOURCE" = 1 ]; then
    log "P4LB_FROM_SOURCE=1: building p4c and BMv2 from source (the package routes are skipped)"
    source_route || true
elif p4_ok; then
    log "p4c and BMv2 already installed: $(PATH="$TOOL_PATH" command -v simple_switch_grpc)"
else
    if [ -z "$(missing_p4)" ]; then
        NOTES+=("found on PATH, but ${WHY}")
        log "p4c and BMv2 found, but ${WHY}: trying the routes"
    fi
    done_p4=1
    if [ "$HAVE_APT" -eq 0 ]; then
        NOTES+=("p4lang publishes apt packages only (Ubuntu, Debian)")
    else
        ARCH="$(dpkg --print-architecture)"
        case "$ID" in
            ubuntu) DIST="xUbuntu_${VERSION_ID}" ;;
            debian) DIST="Debian_${VERSION_ID}" ;;
            *) DIST="" ;;
        esac
        if [ -n "$DIST" ] && [ "$ARCH" = amd64 ] && [[ " $REPO_LATEST_DISTS " == *" $DIST "* ]]; then
            if route_checked "home:p4lang:latest" p4lang-latest "home:p4lang:latest" \
                "$REPO_LATEST" "$DIST"; then
                done_p4=0
                route_forget p4lang # one p4lang source: the older one's mirrors break apt-get update
            fi
        else
            NOTES+=("home:p4lang:latest publishes for ${REPO_LATEST_DISTS} (amd64) only; \
this is ${SYSTEM} (${ARCH})")
            log "skipping home:p4lang:latest: it publishes for ${REPO_LATEST_DISTS} (amd64) only"
        fi
        if [ "$done_p4" -ne 0 ]; then
            if [ -n "$DIST" ]; then
                route_checked "home:p4lang" p4lang "home:p4lang" "$REPO_OLD" "$DIST" && done_p4=0
            else
                NOTES+=("home:p4lang publishes for Ubuntu and Debian only; this is ${SYSTEM}")
            fi
        fi
    fi
    if [ "$done_p4" -ne 0 ]; then
        source_route || true
    fi
fi

# k6, for seed 001's load shapes: its apt repository, else `go install` of the pinned version.
k6_version() { version_of k6 version; }
k6_ok() { have k6 && ver_ge "$(k6_version)" "$P4LB_K6_VERSION"; }
k6_apt_once() {
    local keyring="${KEYRING_DIR%/}/k6.gpg" list="${SOURCES_DIR%/}/k6.list" code
    OUT=""
    code=$(curl -sS -L --max-time "$TIMEOUT" -o "$TMP/k6.key" -w '%{http_code}' \
        "${K6_APT%/deb}/key.gpg" 2>"$TMP/curl.err") || { OUT="key: $(cat "$TMP/curl.err")"; return 1; }
    [ "$code" = 200 ] || { OUT="key: HTTP  $code  $(http_reason "$code")"; return 1; }
    GNUPGHOME="$TMP" gpg --batch --yes --quiet --dearmor -o "$TMP/k6.gpg" "$TMP/k6.key" 2>/dev/null ||
        { OUT="k6's key is not an OpenPGP key"; return 1; }
    $SUDO install -d -m 0755 "$KEYRING_DIR" "$SOURCES_DIR"
    $SUDO install -m 0644 "$TMP/k6.gpg" "$keyring"
    printf 'deb [signed-by=%s] %s stable main\n' "$keyring" "$K6_APT" >"$TMP/k6.list"
    $SUDO install -m 0644 "$TMP/k6.list" "$list"
    OUT=$(apt_get update -q -o Acquire::Retries=0 -o Acquire::http::Timeout="$TIMEOUT" \
        -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 2>&1) || return 1
    if grep -Eq '^(E:|W: Failed to fetch|W: Some index files failed)' <<<"$OUT"; then return 1; fi
    OUT=$(apt_get install -y -q --no-install-recommends "k6=${P4LB_K6_VERSION}" 2>&1) || return 1
}
if [ "${P4LB_K6:-1}" = 0 ]; then
    :
elif k6_ok; then
    log "k6 already installed: $(PATH="$TOOL_PATH" command -v k6)"
else
    k6_done=1
    if [ -n "$K6_APT" ] && [ "$HAVE_APT" -eq 1 ]; then
        log "trying k6's apt repository: ${K6_APT}"
        try=1
        wait=$BACKOFF
        while :; do
            if k6_apt_once; then k6_done=0; break; fi
            kind=$(classify "$OUT")
            if [ "$kind" != transient ] || [ "$try" -ge "$RETRIES" ]; then
                log "k6's apt repository failed (${kind}): $(first_error "$OUT")"
                $SUDO rm -f "${SOURCES_DIR%/}/k6.list" "${KEYRING_DIR%/}/k6.gpg"
                break
            fi
            log "k6's apt repository: transient error ($(first_error "$OUT")); try $((try + 1))/${RETRIES} in ${wait} s"
            sleep "$wait"
            try=$((try + 1))
            wait=$((wait * 2))
        done
    fi
    if [ "$k6_done" -ne 0 ] && PATH="$TOOL_PATH" command -v "$GO" >/dev/null 2>&1; then
        gobin="${P4LB_K6_BIN:-/usr/local/bin}"
        log "go install go.k6.io/k6@v${P4LB_K6_VERSION} into ${gobin}"
        if PATH="$TOOL_PATH" GOBIN="$gobin" "$GO" install "go.k6.io/k6@v${P4LB_K6_VERSION}" \
            >"$TMP/go.log" 2>&1; then
            k6_done=0
        else
            log "go install failed: $(tail -1 "$TMP/go.log")"
        fi
    fi
    if [ "$k6_done" -ne 0 ] || ! k6_ok; then
        NOTES+=("k6 ${P4LB_K6_VERSION}: neither k6's apt repository nor 'go install' gave it \
(install Go, or k6 from https://k6.io); make bench skips seed 001's load shapes without it")
    fi
fi

# 3b. Optional test tools: Chromium (headless) for the stats page's browser test, which
# skips, naming it, where it is absent. A failure here is a note, never an error.
if [ "${P4LB_CHROMIUM:-1}" = 0 ] || [ "$HAVE_APT" -eq 0 ]; then
    :
elif PATH="$TOOL_PATH" command -v chromium >/dev/null 2>&1; then
    log "chromium already installed"
else
    log "installing chromium (optional: the stats page's browser test)"
    [ "$UPDATED" -eq 1 ] || apt_get update -qq || true
    if ! apt_get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
        NOTES+=("chromium: not installed (the stats page's browser test will be skipped)")
    fi
fi

# 4. The Python package and its pinned dependencies.
if [ "${P4LB_VENV:-1}" != 0 ]; then
    if [ -e "$ROOT/.venv" ] &&
        ! { py_ok "$ROOT/.venv/bin/python" && [ -x "$ROOT/.venv/bin/p4lb" ]; }; then
        log "rebuilding .venv (it is incomplete or its Python is older than 3.11)"
        rm -rf "$ROOT/.venv"
    fi
    if py_ok "$PY"; then
        log "installing the p4lb Python package into ${ROOT}/.venv with ${PY}"
        if ! make -C "$ROOT" --no-print-directory venv PY="$PY" >/dev/null; then
            log "FAILED: 'make venv PY=$PY' (its errors are above); fix that and re-run"
            exit 1
        fi
    else
        NOTES+=(".venv: no Python >= 3.11 ($PY) to build it with")
    fi
fi

# 4b. `p4lb` on PATH for sudo: two lines that exec this checkout's .venv/bin/p4lb.
WRAPPER="${P4LB_WRAPPER:-/usr/local/bin/p4lb}"
if [ -x "$ROOT/.venv/bin/p4lb" ]; then
    printf '#!/bin/sh\nexec "%s/.venv/bin/p4lb" "$@"\n' "$ROOT" >"$TMP/p4lb"
    if cmp -s "$TMP/p4lb" "$WRAPPER"; then
        log "p4lb already on PATH: ${WRAPPER}"
    else
        $SUDO install -D -m 0755 "$TMP/p4lb" "$WRAPPER"
        log "installed ${WRAPPER}: it runs ${ROOT}/.venv/bin/p4lb, so 'sudo p4lb stats' works" \
            "(remove the file to uninstall)"
    fi
fi

# 5. What is there now, and one verdict.
found=()
for t in p4c simple_switch_grpc mn ab tcpdump; do
    if have "$t"; then
        case $t in
            ab) found+=("ab $(version_of ab -V)") ;;
            *) found+=("$t $(version_of "$t" --version)") ;;
        esac
    fi
done
if [ -x "$ROOT/.venv/bin/python" ]; then
    found+=(".venv python $(version_of "$ROOT/.venv/bin/python" --version)")
fi
if [ "$HAVE_APT" -eq 1 ]; then
    for p in "${P4_PKGS[@]}"; do
        v=$(dpkg-query --admindir="$DPKG_ADMIN" -W -f='${Version}' "$p" 2>/dev/null) || continue
        [ -z "$v" ] || found+=("$p $v")
    done
fi
if [ "$HAVE_APT" -eq 1 ]; then
    for p in "${TIER_PKGS[@]}"; do
        v=$(dpkg-query --admindir="$DPKG_ADMIN" -W -f='${Version}' "$p" 2>/dev/null) || continue
        [ -z "$v" ] || found+=("$p $v")
    done
fi
if [ -r "${P4LB_PREFIX:-/usr/local}/share/p4lb/toolchain-source.txt" ]; then
    v=$(sed -n 's/^PI_VERSION=//p' "${P4LB_PREFIX:-/usr/local}/share/p4lb/toolchain-source.txt")
    found+=("PI ${v:-?} (source)")
fi
if have k6; then found+=("k6 $(k6_version)"); fi
[ "${#found[@]}" -gt 0 ] || found=(nothing)
joined=$(printf '%s, ' "${found[@]}")
log "installed: ${joined%, }"

missing=()
for t in "${P4_TOOLS[@]}" "${OTHER_TOOLS[@]}"; do have "$t" || missing+=("$t"); done
if [ -z "$(missing_p4)" ] && ! p4_ok; then missing+=("a new enough p4c and BMv2 (${WHY#too old: })"); fi
if [ "${P4LB_VENV:-1}" != 0 ] && [ ! -x "$ROOT/.venv/bin/p4lb" ]; then missing+=(.venv); fi
if [ "${#TIER_PKGS[@]}" -gt 0 ] && { [ "$HAVE_APT" -eq 0 ] || ! all_installed "${TIER_PKGS[@]}"; }; then
    missing+=("${TIER_PKGS[@]}")
fi
if [ "${#missing[@]}" -eq 0 ]; then
    for n in "${NOTES[@]}"; do log "note: ${n}"; done
    log "next: ${NEXT}"
    exit 0
fi
log "MISSING: ${missing[*]}. Everything else is installed."
for n in "${NOTES[@]}"; do log "  ${n}"; done
log "What to do: if a repository was down (403, 5xx, 'Mirror sync in progress'), run 'make deps'"
log "again later: it fetches only what is still missing, and resumes a source build where it"
log "stopped (its logs are under P4LB_SRC_DIR, default /usr/local/src/p4lb/logs). Or use the VM"
log "('cd vagrant && vagrant up'). Lint and unit tests run without p4c and BMv2 ('make test')."
exit 2
