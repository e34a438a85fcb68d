#!/usr/bin/env bash
# The pip package, checked as a user meets it: builds the wheel with maturin
# (pyproject.toml: `bindings = "bin"`, the probe and the shim embedded by
# build.rs), installs it into a fresh virtual environment and runs the
# installed `prewarm-doctor` from that environment's bin/: `--version` must be
# Cargo.toml's version and `report reports/h200-matrix` must exit 0 and start
# with the report's title. .ci/run calls it before the tests.
#
#   bash scripts/wheel-check.sh
#
# maturin: the one on PATH (or $MATURIN), else installed with pip into a venv
# of its own under the target folder ("maturin>=1.9,<2.0", from PyPI). The
# wheel is left in <target>/wheel-check/wheels/ and its path printed last.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "[wheel-check] $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

command -v cargo >/dev/null 2>&1 || . "$HOME/.cargo/env"
command -v python3 >/dev/null 2>&1 || fail "python3 is missing (bash scripts/test.sh --setup-only installs it)"

# python3 -m venv needs ensurepip, which Debian and Ubuntu ship apart
# (python3-venv): installed with apt-get as root or through sudo when missing.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  say "python3 has no venv/ensurepip; installing python3-venv"
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo -n); fi
  { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq python3-venv >/dev/null; } \
    || fail "python3 -m venv does not work and python3-venv could not be installed (needs apt-get as root or sudo)"
fi

# Cargo's view of the package: its version, and where its target folder is
# (CARGO_TARGET_DIR or a config may move it).
metadata=$(cargo metadata --format-version 1 --no-deps --locked)
field() {
  printf '%s' "$metadata" | python3 -c '
import json, sys
m = json.load(sys.stdin)
pkg = next(p for p in m["packages"] if p["name"] == "prewarm-doctor")
print({"version": pkg["version"], "target": m["target_directory"]}[sys.argv[1]])' "$1"
}
version=$(field version)
target_dir=$(field target)
[ -n "$version" ] && [ -n "$target_dir" ] || fail "cargo metadata gave no version or target folder"
work="$target_dir/wheel-check"
say "prewarm-doctor $version; working in $work"

maturin=${MATURIN:-}
if [ -z "$maturin" ] && command -v maturin >/dev/null 2>&1; then
  maturin=$(command -v maturin)
fi
if [ -z "$maturin" ]; then
  tools="$work/maturin-venv"
  if [ ! -x "$tools/bin/maturin" ]; then
    say "installing maturin into $tools"
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9,<2.0"
  fi
  maturin="$tools/bin/maturin"
fi
say "$("$maturin" --version)"

# The build: a release build of the doctor (build.rs builds the probe first,
# as for `cargo build`). maturin checks the binary's shared libraries and
# symbol versions against the manylinux policies and tags the wheel with the
# oldest one it satisfies.
wheels="$work/wheels"
rm -rf "$wheels"
"$maturin" build --release --locked --out "$wheels"
shopt -s nullglob
built=("$wheels"/*.whl)
shopt -u nullglob
[ "${#built[@]}" = 1 ] || fail "expected one wheel in $wheels, found ${#built[@]}"
wheel=${built[0]}
name=$(basename "$wheel")
case "$name" in
  "prewarm_doctor-$version-py3-none-manylinux_"*"_x86_64.whl") ;;
  *) fail "$name: expected prewarm_doctor-$version-py3-none-manylinux_*_x86_64.whl (a plain 'linux' tag means the binary needs a library or symbol outside manylinux)" ;;
esac
say "wheel: $name ($(du -k "$wheel" | cut -f1) KiB)"

# A fresh environment, as a user's training environment would be: pip
# installs the wheel and nothing else (it has no dependencies).
venv="$work/venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$wheel"
doctor="$venv/bin/prewarm-doctor"
[ -x "$doctor" ] || fail "pip install did not put prewarm-doctor in $venv/bin"

# From the environment's PATH, as `source venv/bin/activate` would give it.
got=$(PATH="$venv/bin:$PATH" prewarm-doctor --version)
say "prewarm-doctor --version: $got"
[ "$got" = "prewarm-doctor $version" ] || fail "--version says '$got', Cargo.toml says $version"

report="$work/report.txt"
rc=0
# Run from outside the checkout: the installed binary needs nothing of it.
(cd "$work" && PATH="$venv/bin:$PATH" prewarm-doctor report "$root/reports/h200-matrix") >"$report" || rc=$?
[ "$rc" = 0 ] || fail "prewarm-doctor report reports/h200-matrix exited $rc"
first=$(head -n 1 "$report")
case "$first" in
  "== prewarm-doctor: "*) ;;
  *) fail "the report starts with '$first', not the report's title" ;;
esac
# The probe and the shim travel inside the binary: `check` (which fails on a
# machine without a GPU) extracts them and names the probe. The probe is
# loaded into the training process, so it must not need a newer glibc than
# the wheel's tag promises; maturin checked the binary, this checks the probe.
cache="$work/cache"
rm -rf "$cache"
check=$(PREWARM_DOCTOR_CACHE="$cache" "$doctor" check 2>&1) || true
probe=$(printf '%s\n' "$check" | sed -n 's/^probe: //p')
[ -n "$probe" ] && [ -f "$probe" ] || fail "check named no extracted probe:
$check"
compgen -G "$cache/shim-*/sitecustomize.py" >/dev/null || fail "check extracted no shim into $cache"
floor=${name#*-py3-none-manylinux_}
floor=${floor%_x86_64.whl}
floor=${floor/_/.}
command -v objdump >/dev/null 2>&1 || fail "objdump (binutils) is needed to read the probe's glibc symbol versions"
needs=$(objdump -T "$probe" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1) || true
[ -n "$needs" ] || fail "objdump found no glibc symbol versions in $probe"
[ "$(printf '%s\n%s\n' "$needs" "$floor" | sort -V | tail -n 1)" = "$floor" ] \
  || fail "the embedded probe needs glibc $needs, newer than the wheel's manylinux floor $floor"
say "embedded probe: $(basename "$probe") ($(du -k "$probe" | cut -f1) KiB), needs glibc $needs <= $floor; shim extracted"

say "prewarm-doctor report reports/h200-matrix: exit 0, $(wc -l <"$report") lines, first: $first"
say "OK: pip install of $name puts a working prewarm-doctor $version on the venv's PATH"
echo "$wheel"
