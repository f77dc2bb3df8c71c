#!/usr/bin/env bash
# One install path for p4lb, used by `make deps` natively and by the Vagrant VM.
# Idempotent: run it as often as you like. Installs p4c and BMv2 (simple_switch_grpc)
# from p4lang's official Ubuntu packages, Mininet, ApacheBench, tcpdump, and the Python
# package in .venv. Where p4lang's packages cannot be reached it installs the rest and
# ends with one message naming what is missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

log() { printf 'deps: %s\n' "$*"; }

# shellcheck disable=SC1091
. /etc/os-release
log "system: ${PRETTY_NAME:-unknown}"

# 1. Everything Debian/Ubuntu ship themselves.
BASE_PKGS=(python3 python3-venv python3-pip make git curl gnupg ca-certificates
           mininet apache2-utils tcpdump ethtool iproute2 iputils-ping shellcheck)
log "installing distribution packages"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${BASE_PKGS[@]}" >/dev/null

# 2. p4lang's packages (p4c, BMv2 with simple_switch_grpc), published for Ubuntu only.
P4_REPO_STATUS="not tried"
if [ "${ID:-}" = "ubuntu" ] && [ -n "${VERSION_ID:-}" ]; then
    repo="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}"
    keyring=/etc/apt/keyrings/p4lang.gpg
    if curl -fsSL --max-time 30 "${repo}/Release.key" -o /tmp/p4lang.key; then
        $SUDO install -d -m 0755 /etc/apt/keyrings
        $SUDO gpg --batch --yes --dearmor -o "$keyring" /tmp/p4lang.key
        echo "deb [signed-by=${keyring}] ${repo}/ /" |
            $SUDO tee /etc/apt/sources.list.d/p4lang.list >/dev/null
        $SUDO apt-get update -qq
        if $SUDO apt-get install -y -qq --no-install-recommends p4lang-p4c p4lang-bmv2 >/dev/null; then
            P4_REPO_STATUS="installed"
        else
            P4_REPO_STATUS="p4lang repository reached, but its packages did not install"
        fi
    else
        P4_REPO_STATUS="p4lang repository unreachable (${repo})"
    fi
else
    P4_REPO_STATUS="p4lang publishes packages for Ubuntu only; this is ${ID:-unknown} ${VERSION_ID:-}"
fi

# 3. The Python package and its pinned dependencies, in a virtualenv.
log "installing the p4lb Python package into ${ROOT}/.venv"
make -C "$ROOT" --no-print-directory venv >/dev/null

# 4. One verdict.
missing=()
for tool in p4c simple_switch_grpc mn ab tcpdump; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -eq 0 ]; then
    log "all tools present: p4c $(p4c --version 2>/dev/null | tail -1), $(simple_switch_grpc --version 2>/dev/null | head -1)"
    exit 0
fi
log "MISSING: ${missing[*]} (${P4_REPO_STATUS}). Everything else is installed."
log "Get p4c and BMv2 from p4lang's packages on Ubuntu 22.04/24.04 (make deps there), or use"
log "the VM: 'cd vagrant && vagrant up'. The unit tests and lint run without them (make test)."
exit 2
