#!/usr/bin/env bash
# The tests, on any machine: installs what they need when it is missing, then
# runs every test of the workspace. The README's test command, and what
# .ci/run runs.
#
#   bash scripts/test.sh               install what is missing, then the tests
#   bash scripts/test.sh --setup-only  only install (what .ci/run does first)
#
# What the tests need besides Rust: a C compiler (the probe's tests), python3
# (the shim's tests), tmux (tests/tui_tmux.rs: the dashboard in a real
# terminal) and headless Chromium (tests/html_chromium.rs: the HTML report in
# a browser), installed with apt-get (as root, or through sudo). Where they
# cannot be installed the tests that need them fail and name what is missing;
# PD_SKIP_CHROMIUM=1 and PREWARM_DOCTOR_NO_TMUX=1 skip those tests knowingly
# (and skip installing them). Every test runs either way (--no-fail-fast): one
# failing test program does not stop the others.
#
# The shim's sys.monitoring path (what the GPU machines run) is tested under a
# Python >= 3.12, found as the tests find it (tests/common/python312.rs):
# PREWARM_TEST_PYTHON312, then pyenv's 3.12+, then python3.12, python3.13 or
# python3 on PATH. Where there is none, apt-get installs python3.13 or
# python3.12 if the distribution has one (Debian 12 has neither); else the
# script stops before the build, naming PD_SKIP_PYTHON312=1, which skips those
# tests knowingly (issue 39).
set -euo pipefail
cd "$(dirname "$0")/.."

setup_only=false
case "${1:-}" in
  --setup-only) setup_only=true ;;
  "") ;;
  *) echo "usage: bash scripts/test.sh [--setup-only]" >&2; exit 2 ;;
esac

# apt-get as root, or through sudo; false where neither is possible.
as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo "$@"
  else
    return 1
  fi
}

apt_updated=false
# apt-get update, once.
apt_update() {
  if ! $apt_updated; then
    as_root apt-get update -qq || true
    apt_updated=true
  fi
}

# apt_install PROGRAM PACKAGE WHY: installs PACKAGE unless PROGRAM is on PATH;
# a failure is said, not fatal (the tests that need it then say so).
apt_install() {
  local program=$1 package=$2 why=$3
  command -v "$program" >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: $program is missing and this machine has no apt-get: install $package yourself ($why)" >&2
    return 0
  fi
  apt_update
  if ! as_root apt-get install -y -qq "$package" >/dev/null; then
    echo "scripts/test.sh: could not install $package (apt-get needs root or sudo): $why" >&2
  fi
}

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    . "$HOME/.cargo/env"
  else
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    . "$HOME/.cargo/env"
  fi
fi
apt_install cc build-essential "the probe's tests compile a C program and Rust links with it"
apt_install python3 python3 "the shim's tests run Python"
if [ "${PREWARM_DOCTOR_NO_TMUX:-}" = "" ]; then
  apt_install tmux tmux "tests/tui_tmux.rs fails without it; PREWARM_DOCTOR_NO_TMUX=1 skips it"
fi
if [ "${PD_SKIP_CHROMIUM:-}" != 1 ] && [ "${PD_CHROMIUM:-}" = "" ]; then
  for browser in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$browser" >/dev/null 2>&1 && break
  done
  apt_install "$browser" chromium "tests/html_chromium.rs fails without it; PD_SKIP_CHROMIUM=1 skips it"
fi

# is_python312 PYTHON: whether PYTHON runs and is Python >= 3.12.
is_python312() {
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

# find_python312: prints the Python >= 3.12 the tests will run, in their
# order (pyenv's versions newest first); fails where there is none.
find_python312() {
  if [ -n "${PREWARM_TEST_PYTHON312:-}" ]; then
    is_python312 "$PREWARM_TEST_PYTHON312" && echo "$PREWARM_TEST_PYTHON312"
    return
  fi
  local pyenv=("${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3) i py
  for ((i = ${#pyenv[@]} - 1; i >= 0; i--)); do
    if is_python312 "${pyenv[i]}"; then echo "${pyenv[i]}"; return 0; fi
  done
  for py in python3.12 python3.13 python3; do
    if is_python312 "$py"; then echo "$py"; return 0; fi
  done
  return 1
}

# apt_offers PACKAGE: whether apt-get has a version of PACKAGE to install
# (`apt-cache policy` names a candidate; it says nothing of a package the
# distribution does not have).
apt_offers() {
  command -v apt-cache >/dev/null 2>&1 || return 1
  local policy
  policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
  case "$policy" in
    *"Candidate: (none)"*) return 1 ;;
    *"Candidate: "*) return 0 ;;
    *) return 1 ;;
  esac
}

python312=""
if [ "${PD_SKIP_PYTHON312:-}" = 1 ]; then
  echo "PD_SKIP_PYTHON312=1: the tests of the shim's sys.monitoring path (Python >= 3.12) are skipped on request"
else
  python312=$(find_python312) || true
  if [ -z "$python312" ] && [ -z "${PREWARM_TEST_PYTHON312:-}" ] && command -v apt-get >/dev/null 2>&1; then
    apt_update
    for package in python3.13 python3.12; do
      apt_offers "$package" || continue
      if ! as_root apt-get install -y -qq "$package" >/dev/null; then
        echo "scripts/test.sh: could not install $package (apt-get needs root or sudo)" >&2
      fi
      python312=$(find_python312) || true
      [ -n "$python312" ] && break
    done
  fi
  if [ -z "$python312" ]; then
    if [ -n "${PREWARM_TEST_PYTHON312:-}" ]; then
      found="PREWARM_TEST_PYTHON312=$PREWARM_TEST_PYTHON312 does not run as a Python >= 3.12"
    else
      found="no Python >= 3.12 was found (pyenv's ~/.pyenv/versions/3.12+, python3.12, python3.13 or python3 on PATH) and apt-get has none to install"
    fi
    echo "scripts/test.sh: $found: the tests of the shim's sys.monitoring path (what the GPU machines run) fail without one. Install one (\`pyenv install 3.12\`), point PREWARM_TEST_PYTHON312 at one, or set PD_SKIP_PYTHON312=1 to skip those tests knowingly." >&2
    exit 1
  fi
fi

cargo --version
python3 --version || true
if [ -n "$python312" ]; then
  echo "Python >= 3.12 for the sys.monitoring tests: $("$python312" --version 2>&1) ($python312)"
fi
tmux -V || true
"${PD_CHROMIUM:-chromium}" --version 2>/dev/null || true

$setup_only && exit 0
exec cargo test --workspace --locked --no-fail-fast
