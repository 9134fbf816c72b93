#!/usr/bin/env bash
# Install the third-party clients that tests/conformance drives, the way a user installs them:
#   - ali-ons 3.12.0 (pure JavaScript) with `npm ci` in conformance/ali-ons, from its lock file;
#   - rocketmq==0.4.4 (PyPI; the wheel bundles the C++ 4.x client, librocketmq.so) with pip in its
#     own virtual environment, .conformance-venv (override: CONFORMANCE_VENV=DIR);
#   - rocketmq-python-client==5.1.2 (PyPI; the official 5.x gRPC client) with pip in its own
#     virtual environment, .conformance-venv5 (override: CONFORMANCE_VENV5=DIR), its dependencies
#     pinned by conformance/grpc-python/constraints.txt;
#   - rocketmq-client-nodejs 1.0.8 (npm; the official 5.x gRPC client) with `npm ci` in
#     conformance/nodejs5, from its lock file.
# Needs Node.js >= 20 with npm, and Python 3 with venv (PYTHON, default python3). The wheel is
# manylinux1 x86_64 only; it bundles zlib and needs only libstdc++6 and libgcc-s1 from the system,
# which every Debian with apt already has (apt depends on them). Nothing else is installed.
# Idempotent: with nothing changed, a second run does nothing and prints "up to date".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ons_dir="$root/conformance/ali-ons"
node5_dir="$root/conformance/nodejs5"
venv="${CONFORMANCE_VENV:-$root/.conformance-venv}"
venv5="${CONFORMANCE_VENV5:-$root/.conformance-venv5}"
constraints5="$root/conformance/grpc-python/constraints.txt"
python="${PYTHON:-python3}"
rocketmq_pin="rocketmq==0.4.4"
grpc_python_pin="rocketmq-python-client==5.1.2"
node5_version="1.0.8"
t0=$SECONDS

die() { echo "conformance_setup: $*" >&2; exit 1; }

# -- ali-ons -------------------------------------------------------------------------------------
command -v node >/dev/null || die "node is not installed (Node.js >= 20 is needed for ali-ons)"
command -v npm >/dev/null || die "npm is not installed (it comes with Node.js >= 20)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "Node.js $(node --version) is too old: ali-ons scenarios need >= 20"

# npm ci wipes and reinstalls node_modules; skip it while the installed tree matches the lock
# file (npm writes node_modules/.package-lock.json after every install).
ons_stamp="$ons_dir/node_modules/.conformance-installed"
if [ -f "$ons_stamp" ] && [ "$ons_stamp" -nt "$ons_dir/package-lock.json" ] \
    && [ "$ons_stamp" -nt "$ons_dir/package.json" ] \
    && node -e 'process.exit(require(process.argv[1]).version === "3.12.0" ? 0 : 1)' \
        "$ons_dir/node_modules/ali-ons/package.json" 2>/dev/null; then
    echo "ali-ons: up to date ($ons_dir/node_modules)"
else
    echo "ali-ons: npm ci in $ons_dir"
    (cd "$ons_dir" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$ons_stamp"
fi
node -e 'const v = require(process.argv[1]).version; if (v !== "3.12.0") { console.error(`ali-ons ${v} installed, 3.12.0 expected`); process.exit(1) } require(process.argv[2])' \
    "$ons_dir/node_modules/ali-ons/package.json" "$ons_dir/node_modules/ali-ons" \
    || die "ali-ons did not install as pinned"

# -- rocketmq-client-nodejs 1.0.8 (5.x gRPC client) ----------------------------------------------
node5_stamp="$node5_dir/node_modules/.conformance-installed"
if [ -f "$node5_stamp" ] && [ "$node5_stamp" -nt "$node5_dir/package-lock.json" ] \
    && [ "$node5_stamp" -nt "$node5_dir/package.json" ] \
    && node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
        "$node5_dir/node_modules/rocketmq-client-nodejs/package.json" "$node5_version" 2>/dev/null; then
    echo "rocketmq-client-nodejs: up to date ($node5_dir/node_modules)"
else
    echo "rocketmq-client-nodejs: npm ci in $node5_dir"
    (cd "$node5_dir" && npm ci --no-audit --no-fund --loglevel=error) \
        || die "npm ci in $node5_dir failed (is registry.npmjs.org reachable?)"
    touch "$node5_stamp"
fi
node -e 'const v = require(process.argv[1]).version; if (v !== process.argv[3]) { console.error(`rocketmq-client-nodejs ${v} installed, ${process.argv[3]} expected`); process.exit(1) } require(process.argv[2])' \
    "$node5_dir/node_modules/rocketmq-client-nodejs/package.json" \
    "$node5_dir/node_modules/rocketmq-client-nodejs" "$node5_version" \
    || die "rocketmq-client-nodejs did not install as pinned"

# -- rocketmq 0.4.4 (C++ 4.x client) -------------------------------------------------------------
command -v "$python" >/dev/null || die "$python is not installed"
[ "$(uname -m)" = x86_64 ] || die "rocketmq 0.4.4 ships only a manylinux1 x86_64 wheel, not $(uname -m)"
# The stamps name the Python that made the venv too: a venv of another minor version is remade.
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
venv_stamp="$venv/.installed-$rocketmq_pin-py$py_version"
if [ -f "$venv_stamp" ] && [ -x "$venv/bin/python" ]; then
    echo "$rocketmq_pin: up to date ($venv)"
else
    echo "$rocketmq_pin: creating $venv"
    "$python" -m venv --clear "$venv" || die "$python -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "$rocketmq_pin"
    touch "$venv_stamp"
fi
lib="$("$venv/bin/python" -c 'import os, rocketmq; print(os.path.join(os.path.dirname(rocketmq.__file__), "librocketmq.so"))')"
if command -v ldd >/dev/null && ldd "$lib" | grep -q 'not found'; then
    ldd "$lib" | grep 'not found' >&2
    die "librocketmq.so misses system libraries (Debian: apt-get install -y libstdc++6 libgcc-s1)"
fi
"$venv/bin/python" -c 'import rocketmq.client' || die "the rocketmq wheel does not load (see above)"

# -- rocketmq-python-client 5.1.2 (5.x gRPC client) -----------------------------------------------
# The stamp names the constraints file's checksum, so a changed pin set reinstalls.
pins5="$(cksum < "$constraints5" | cut -d' ' -f1)"
venv5_stamp="$venv5/.installed-$grpc_python_pin-$pins5-py$py_version"
if [ -f "$venv5_stamp" ] && [ -x "$venv5/bin/python" ]; then
    echo "$grpc_python_pin: up to date ($venv5)"
else
    echo "$grpc_python_pin: creating $venv5"
    "$python" -m venv --clear "$venv5" || die "$python -m venv failed (Debian: apt-get install python3-venv)"
    "$venv5/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c "$constraints5" "$grpc_python_pin" \
        || die "pip install $grpc_python_pin (constraints $constraints5) failed (is pypi.org reachable?)"
    touch "$venv5_stamp"
fi
"$venv5/bin/python" -c 'import importlib.metadata as m, sys; v = m.version("rocketmq-python-client"); sys.exit(0 if v == "5.1.2" else f"rocketmq-python-client {v} installed, 5.1.2 expected")' \
    || die "$grpc_python_pin did not install as pinned"
"$venv5/bin/python" -c 'from rocketmq import Producer, SimpleConsumer, PushConsumer' \
    || die "rocketmq-python-client does not import (see above)"

echo "conformance clients ready in $((SECONDS - t0)) s: node $(node --version), ali-ons 3.12.0, $rocketmq_pin in $venv, rocketmq-client-nodejs $node5_version, $grpc_python_pin in $venv5"
