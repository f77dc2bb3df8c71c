#!/usr/bin/env bash
# Vagrant's provisioner: the same install path as `make deps`, nothing VM-specific.
set -euo pipefail
sudo apt-get update -qq
sudo apt-get install -y -qq make >/dev/null
cd /vagrant
make deps
