#!/usr/bin/env bash
# The source route: PI, BMv2 (simple_switch_grpc) and p4c (BMv2 back end) built from p4lang's
# repositories at the commits pinned in scripts/toolchain.env, installed into a prefix.
# scripts/install-deps.sh runs it when no package route gives p4c and BMv2 (or when
# P4LB_FROM_SOURCE=1); it also runs on its own:
#
#   scripts/build-from-source.sh            every step, in order
#   scripts/build-from-source.sh STEP...    only those steps (deps fetch pi bmv2 bmv2-speed p4c check)
#
# Resumable: a step that finished leaves a stamp naming its pin and prefix, and a re-run skips
# it; an interrupted build picks up where make or cmake stopped.
#
# Overridable by environment:
#   P4LB_PREFIX        where the toolchain goes                           (/usr/local)
#   P4LB_SRC_DIR       sources, build trees, logs and stamps              (/usr/local/src/p4lb)
#   P4LB_GIT_BASE      where the repositories are: URL or directory holding OWNER/NAME
#                      (https://github.com); a local copy or a mirror can stand in
#   P4LB_GIT_<KEY>     one repository's own URL or path, KEY as in toolchain.env's P4LB_PIN_<KEY>
#                      (P4LB_GIT_PI, P4LB_GIT_BMV2, P4LB_GIT_P4C, P4LB_GIT_P4C_P4RUNTIME, ...;
#                      PI's submodules: P4LB_GIT_PI_P4RUNTIME, P4LB_GIT_PI_GNMI)
#   P4LB_BMV2_SPEED=1  also build the speed BMv2 (no logging macros, no event logger, -O3)
#   P4LB_SPEED_PREFIX  where it goes                                      (/opt/p4lb/bmv2-speed)
#   P4LB_JOBS          parallel compile jobs                              (nproc)
#   P4LB_APT=0         do not install the distribution's build dependencies (they must be there)
#   P4LB_TOOLCHAIN_ENV the pins and minimums                               (scripts/toolchain.env)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLCHAIN_ENV="${P4LB_TOOLCHAIN_ENV:-$ROOT/scripts/toolchain.env}"
# shellcheck disable=SC1090 # plain KEY=value lines
. "$TOOLCHAIN_ENV"

PREFIX="${P4LB_PREFIX:-/usr/local}"
SRC="${P4LB_SRC_DIR:-/usr/local/src/p4lb}"
GIT_BASE="${P4LB_GIT_BASE:-https://github.com}"
SPEED="${P4LB_BMV2_SPEED:-0}"
SPEED_PREFIX="${P4LB_SPEED_PREFIX:-/opt/p4lb/bmv2-speed}"
JOBS="${P4LB_JOBS:-$(nproc 2>/dev/null || echo 2)}"
LOGS="$SRC/logs"
STAMPS="$SRC/stamps"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

log() { printf 'source route: %s\n' "$*"; }
die() {
    log "FAILED: $*"
    exit 1
}

# The distribution's build dependencies (Debian 12/13, Ubuntu 22.04/24.04 names).
BUILD_PKGS=(
    git ca-certificates g++ make cmake autoconf automake libtool pkg-config bison flex
    libfl-dev libgmp-dev libgc-dev libboost-dev libboost-graph-dev libboost-iostreams-dev
    libboost-program-options-dev libboost-system-dev libboost-filesystem-dev
    libboost-thread-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
    libreadline-dev uthash-dev googletest libpcap-dev libevent-dev libssl-dev libthrift-dev
    thrift-compiler python3-thrift libnanomsg-dev libxxhash-dev libjsoncpp-dev python3
)

# P4LB_PIN_<KEY>=owner/name@commit -> repository and commit.
pin_repo() {
    local v="P4LB_PIN_$1"
    echo "${!v%@*}"
}
pin_commit() {
    local v="P4LB_PIN_$1"
    echo "${!v#*@}"
}
# Where repository KEY (owner/name) is fetched from: P4LB_GIT_<KEY>, else P4LB_GIT_BASE/owner/name.
repo_url() {
    local key=$1 name=$2 v="P4LB_GIT_$1"
    if [ -n "${!v:-}" ]; then echo "${!v}"; else echo "${GIT_BASE%/}/${name}"; fi
}

# A checkout of URL at COMMIT in DIR, reused when it is already there. A local repository is
# cloned whole (hardlinks, no pack to make); a remote one gives just that commit. Slides in
# p4c's docs/ are left out (a mirror may lack blobs that large; nothing builds from them).
checkout() {
    local url=$1 commit=$2 dir=$3
    if [ -d "$dir/.git" ] && [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" = "$commit" ]; then
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ -d "$url" ]; then
        git clone -q --no-checkout "$url" "$dir"
    else
        git -C "$dir" init -q
        git -C "$dir" remote add origin "$url"
        git -C "$dir" fetch -q --depth 1 origin "$commit" ||
            git -C "$dir" fetch -q origin # servers that refuse a bare commit: all of it
    fi
    git -C "$dir" sparse-checkout set --no-cone '/*' '!/docs/*.pptx'
    # A blob the sparse patterns leave out may be absent from a mirror: git says so and goes on.
    git -C "$dir" -c advice.detachedHead=false checkout -q "$commit" 2>/dev/null ||
        git -C "$dir" -c advice.detachedHead=false checkout -q "$commit"
    [ "$(git -C "$dir" rev-parse HEAD)" = "$commit" ] || return 1
}

# Step bookkeeping: a stamp holds what the step was done for (its pins and prefix).
stamp_of() { printf '%s\n' "$@"; }
done_already() {
    local step=$1
    shift
    [ -f "$STAMPS/$step" ] && [ "$(cat "$STAMPS/$step")" = "$(stamp_of "$@")" ]
}
mark_done() {
    local step=$1
    shift
    mkdir -p "$STAMPS"
    stamp_of "$@" >"$STAMPS/$step"
}

# --- the steps -----------------------------------------------------------------------------

step_deps() {
    if [ "${P4LB_APT:-1}" = 0 ]; then
        log "P4LB_APT=0: not installing build dependencies"
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "no apt-get: install the equivalents of ${BUILD_PKGS[*]} and run with P4LB_APT=0"
    local missing=() p
    for p in "${BUILD_PKGS[@]}"; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    $SUDO apt-get update -qq || log "apt-get update reported errors; going on"
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

step_fetch() {
    local key dir
    for key in PI BMV2 P4C P4C_P4RUNTIME PROTOBUF ABSEIL; do
        dir="$SRC/src/$(basename "$(pin_repo "$key")")"
        [ "$key" = P4C_P4RUNTIME ] && dir="$SRC/src/p4c-p4runtime"
        log "  $(pin_repo "$key") @ $(pin_commit "$key") <- $(repo_url "$key" "$(pin_repo "$key")")"
        checkout "$(repo_url "$key" "$(pin_repo "$key")")" "$(pin_commit "$key")" "$dir" ||
            die "could not check out $(pin_repo "$key") at $(pin_commit "$key")"
    done
    # PI's protos come from its submodules, at the commits PI's tree records.
    local sub name commit
    for sub in p4runtime:proto/p4runtime:p4lang/p4runtime gnmi:proto/openconfig/gnmi:openconfig/gnmi; do
        IFS=: read -r key dir name <<<"$sub"
        commit=$(git -C "$SRC/src/PI" ls-tree HEAD "$dir" | awk '{print $3}')
        log "  $name @ $commit (PI's $dir)"
        checkout "$(repo_url "PI_${key^^}" "$name")" "$commit" "$SRC/src/PI/$dir" ||
            die "could not check out $name at $commit for PI"
    done
}

# autotools project in source dir S, built out of tree in B, installed into P.
autotools() {
    local s=$1 b=$2 p=$3
    shift 3
    # A stamp, not the configure script, says autogen finished: one it did not leaves a
    # configure behind without its auxiliary files.
    if [ ! -f "$s/.p4lb-autogen" ]; then
        (cd "$s" && ./autogen.sh)
        touch "$s/.p4lb-autogen"
    fi
    mkdir -p "$b"
    if [ ! -f "$b/Makefile" ] || [ "$(cat "$b/.p4lb-configure" 2>/dev/null)" != "$p $*" ]; then
        (cd "$b" && "$s/configure" --prefix="$p" "$@")
        echo "$p $*" >"$b/.p4lb-configure"
    fi
    make -C "$b" -j"$JOBS"
    $SUDO make -C "$b" install
    $SUDO ldconfig
}

step_pi() {
    # PI's configure wants its googletest and uthash submodules: the distribution's stand in.
    local pi="$SRC/src/PI"
    [ -e "$pi/third_party/googletest/googletest/src/gtest.cc" ] || {
        rm -rf "$pi/third_party/googletest"
        mkdir -p "$pi/third_party"
        ln -s /usr/src/googletest "$pi/third_party/googletest"
    }
    mkdir -p "$pi/third_party/uthash/src"
    local h
    for h in utarray uthash utlist utringbuffer utstack utstring; do
        [ -e "$pi/third_party/uthash/src/$h.h" ] || ln -s "/usr/include/$h.h" "$pi/third_party/uthash/src/$h.h"
    done
    autotools "$SRC/src/PI" "$SRC/build/PI" "$PREFIX" \
        --with-proto --without-internal-rpc --without-cli --without-bmv2
}

# BMv2's CLI wrappers run `python3` from PATH; a Python of one's own (pyenv, a venv) ahead of
# the distribution's lacks the thrift module they import: they get the distribution's. And
# automake puts BMv2's Python modules (runtime_CLI, bmpy_utils) under site-packages, which
# Debian's Python does not read: a .pth file in its own directory for local installs points
# there, so scripts (and the tests' register reads) can import them too.
pin_cli_python() {
    local f dir site
    for f in "$1"/bin/*_CLI "$1"/bin/bm_*; do
        if [ ! -f "$f" ] || ! head -1 "$f" | grep -q '^#!/usr/bin/env python3'; then continue; fi
        $SUDO sed -i '1s|^#!/usr/bin/env python3$|#!/usr/bin/python3|' "$f"
    done
    [ "$1" = "$PREFIX" ] || return 0
    dir=$(sed -n 's/^sys.path.append("\(.*\)")$/\1/p' "$1/bin/simple_switch_CLI" 2>/dev/null || true)
    if [ -n "$dir" ] && [ -x /usr/bin/python3 ] &&
        ! /usr/bin/python3 -c 'import bmpy_utils' 2>/dev/null; then
        site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
        echo "$dir" | $SUDO tee "$site/p4lb-bmv2.pth" >/dev/null
    fi
}

bmv2() {
    local build=$1 prefix=$2
    shift 2
    # Out of tree, BMv2's generated headers sit in the build tree's include/.
    autotools "$SRC/src/behavioral-model" "$build" "$prefix" --with-pi --with-thrift \
        PYTHON=/usr/bin/python3 CPPFLAGS="-I$build/include -I$PREFIX/include" \
        LDFLAGS="-L$PREFIX/lib -Wl,-rpath,$PREFIX/lib" "$@"
    pin_cli_python "$prefix"
}
step_bmv2() { bmv2 "$SRC/build/bmv2" "$PREFIX"; }
step_bmv2_speed() {
    bmv2 "$SRC/build/bmv2-speed" "$SPEED_PREFIX" --disable-logging-macros --disable-elogger \
        'CXXFLAGS=-O3 -g0' 'CFLAGS=-O3 -g0'
}

step_p4c() {
    local b="$SRC/build/p4c"
    mkdir -p "$b"
    # GCC 12's libstdc++ (Debian 12) picks std::erase_if for ir/visitor.cpp's map, which
    # hands the predicate a const element: make the two lambdas take one (as later p4c does).
    local visitor="$SRC/src/p4c/ir/visitor.cpp"
    if [ -f "$visitor" ]; then
        sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' \
            "$visitor"
    fi
    cmake -S "$SRC/src/p4c" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
        -DENABLE_BMV2=ON -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF \
        -DENABLE_TOFINO=OFF -DENABLE_P4TEST=OFF -DENABLE_P4FMT=OFF -DENABLE_P4C_GRAPHS=OFF \
        -DENABLE_TEST_TOOLS=OFF -DENABLE_GTESTS=OFF -DENABLE_DOCS=OFF -DENABLE_LTO=OFF \
        -DP4C_USE_PREINSTALLED_BDWGC=ON \
        -DFETCHCONTENT_FULLY_DISCONNECTED=OFF \
        -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$SRC/src/protobuf" \
        -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$SRC/src/abseil-cpp" \
        -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$SRC/src/p4c-p4runtime"
    cmake --build "$b" -j"$JOBS"
    $SUDO cmake --install "$b"
}

# The installed versions against the minimums; one line each.
step_check() {
    local bad=0 v
    check_one() {
        if [ "$2" = "?" ] || ! ver_ge "$2" "$3"; then
            log "  $1 $2: p4lb needs >= $3"
            bad=1
        else
            log "  $1 $2 (>= $3)"
        fi
    }
    v=$("$PREFIX/bin/p4c" --version 2>&1 | grep -Eo '[0-9]+(\.[0-9]+)+' | head -1 || echo "?")
    check_one p4c "${v:-?}" "$P4LB_MIN_P4C"
    v=$("$PREFIX/bin/simple_switch_grpc" --version 2>&1 | grep -Eo '[0-9]+(\.[0-9]+)+' | head -1 ||
        echo "?")
    check_one simple_switch_grpc "${v:-?}" "$P4LB_MIN_BMV2"
    local pi_v
    pi_v=$(sed -n 's/^AC_INIT(\[PI\], \[\([0-9.]*\)\].*/\1/p' "$SRC/src/PI/configure.ac")
    check_one PI "${pi_v:-?}" "$P4LB_MIN_PI"
    if [ "$SPEED" = 1 ]; then
        v=$("$SPEED_PREFIX/bin/simple_switch_grpc" --version 2>&1 |
            grep -Eo '[0-9]+(\.[0-9]+)+' | head -1 || echo "?")
        check_one "simple_switch_grpc (speed, $SPEED_PREFIX)" "${v:-?}" "$P4LB_MIN_BMV2"
    fi
    [ "$bad" -eq 0 ] || die "the toolchain built is older than p4lb needs (above)"
    $SUDO mkdir -p "$PREFIX/share/p4lb"
    { grep '^P4LB_PIN_' "$TOOLCHAIN_ENV"; echo "PI_VERSION=$pi_v"; } |
        $SUDO tee "$PREFIX/share/p4lb/toolchain-source.txt" >/dev/null
}

# 1.2.5 >= 1.2.5, 1.15.5 >= 1.15.0; "1.2.5.16-rc" compares by its numbers.
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

# --- the run -------------------------------------------------------------------------------

NAMES=(deps fetch pi bmv2 bmv2-speed p4c check)
ALL=(deps fetch pi bmv2 p4c check)
if [ "$SPEED" = 1 ]; then ALL=("${NAMES[@]}"); fi
STEPS=("$@")
[ "${#STEPS[@]}" -gt 0 ] || STEPS=("${ALL[@]}")
for s in "${STEPS[@]}"; do
    case " ${NAMES[*]} " in *" $s "*) ;; *) die "unknown step '$s' (steps: ${NAMES[*]})" ;; esac
done

# What each step's stamp depends on.
stamp_args() {
    case $1 in
        deps) echo "${BUILD_PKGS[*]}" ;;
        fetch) grep '^P4LB_PIN_' "$TOOLCHAIN_ENV" | tr '\n' ' ' ;;
        pi) echo "$P4LB_PIN_PI $PREFIX" ;;
        bmv2) echo "$P4LB_PIN_BMV2 $P4LB_PIN_PI $PREFIX" ;;
        bmv2-speed) echo "$P4LB_PIN_BMV2 $P4LB_PIN_PI $SPEED_PREFIX" ;;
        p4c) echo "$P4LB_PIN_P4C $P4LB_PIN_PROTOBUF $P4LB_PIN_ABSEIL $PREFIX" ;;
        check) echo "always" ;;
    esac
}

mkdir -p "$LOGS" "$SRC/src" "$SRC/build"
log "building PI, BMv2 and p4c from source into $PREFIX (sources and logs in $SRC)"
log "this takes about 75 minutes on 2 cores, most of it p4c (measured on Debian 12);" \
    "an interrupted run resumes where it stopped"
n=0
for s in "${STEPS[@]}"; do
    n=$((n + 1))
    args=$(stamp_args "$s")
    if [ "$s" != check ] && done_already "$s" "$args"; then
        log "step $n/${#STEPS[@]}: $s: done already"
        continue
    fi
    logf="$LOGS/$s.log"
    log "step $n/${#STEPS[@]}: $s (log: $logf)"
    start=$(date +%s)
    fn="step_${s//-/_}"
    # Not in an if or a || list: there bash would ignore errexit inside the step.
    set +e
    if [ "$s" = fetch ] || [ "$s" = check ]; then
        (set -e; "$fn") 2>&1 | tee "$logf"
        rc=${PIPESTATUS[0]}
    else
        (set -e; "$fn") >"$logf" 2>&1
        rc=$?
    fi
    set -e
    [ "$rc" -eq 0 ] || die "step $s (exit $rc); the end of $logf:"$'\n'"$(tail -20 "$logf")"
    [ "$s" = check ] || mark_done "$s" "$args"
    log "step $n/${#STEPS[@]}: $s: done in $(($(date +%s) - start)) s"
done
