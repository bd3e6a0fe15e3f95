#!/usr/bin/env bash
# Installs every Debian and PyPI package the build and the tests need.
# Package lists live in deps/apt/*.txt and deps/pip/*.txt (one name a line).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
apt_pkgs=$(cat "$root"/deps/apt/*.txt | sed 's/#.*//' | tr -s ' \n' '\n' | grep -v '^$' | sort -u | tr '\n' ' ')
missing=""
for p in $apt_pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
pip_reqs=$(cat "$root"/deps/pip/*.txt | sed 's/#.*//' | grep -v '^\s*$' | sort -u)
if [ -n "$pip_reqs" ]; then
  # shellcheck disable=SC2086
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check $pip_reqs
fi
nodeps_reqs=$(cat "$root"/deps/pip-nodeps/*.txt 2>/dev/null | sed 's/#.*//' | grep -v '^\s*$' | sort -u)
if [ -n "$nodeps_reqs" ]; then
  # shellcheck disable=SC2086
  python3 -m pip install -q --disable-pip-version-check --no-deps $nodeps_reqs >/dev/null
fi
