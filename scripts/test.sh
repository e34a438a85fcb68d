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
# apt_install PROGRAM PACKAGE WHY: installs PACKAGE unless PROGRAM is on PATH;
# a failure is said, not fatal (the tests that need it then say so).
apt_install() {
  local program=$1 package=$2 why=$3
  command -v "$program" >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: $program is missing and this machine has no apt-get: install $package yourself ($why)" >&2
    return 0
  fi
  if ! $apt_updated; then
    as_root apt-get update -qq || true
    apt_updated=true
  fi
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

cargo --version
python3 --version || true
# The shim's sys.monitoring path (Python >= 3.12, what the GPU machines run)
# is tested under pyenv's 3.12/3.13 where the machine has them; else those
# tests say SKIPPED and only the wrappers' path is tested.
for py in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
  [ -x "$py" ] && echo "Python >= 3.12 for the sys.monitoring tests: $("$py" --version) ($py)"
done || true
tmux -V || true
"${PD_CHROMIUM:-chromium}" --version 2>/dev/null || true

$setup_only && exit 0
exec cargo test --workspace --locked --no-fail-fast
