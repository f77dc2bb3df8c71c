#!/usr/bin/env bash
# Vagrant's provisioner: the same install path as `make deps`, nothing VM-specific but the
# next command it prints (typed on the host).
set -euo pipefail
cd /vagrant
P4LB_NEXT="vagrant ssh -c 'cd /vagrant && sudo make run'" bash scripts/install-deps.sh
