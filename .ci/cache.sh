# Sourced by the CI entry points (.ci/run, .ci/conformance). Each CI run is a fresh clone; what
# does not depend on the clone's own files is kept between runs on this machine, outside the
# clone, in $ROCKETLITE_CI_CACHE (default ~/.cache/rocketlite-ci):
#   mypy/                 mypy's incremental cache (a module whose source hash changed is checked
#                         again; cold, mypy takes about 45 s)
#   conformance-venv*/    the conformance clients' virtual environments (scripts/conformance_setup.sh:
#                         their stamps name the pins, the constraints' checksum and the Python, so
#                         a change reinstalls)
#   venv-<key>/           the project's virtual environment (scripts/_venv.sh), one per clone
#                         path and content of pyproject.toml and setup.py, so that it holds
#                         exactly the dependencies this clone names and its editable install
#                         points at this clone; scripts/_venv.sh installs the project (and its
#                         compiled core) into it again, the dependencies already there. The 3
#                         most recently used are kept (about 1 GB each).
# A variable already set (MYPY_CACHE_DIR, CONFORMANCE_VENV, CONFORMANCE_VENV5, ROCKETLITE_VENV)
# wins.
ci_cache="${ROCKETLITE_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocketlite-ci}"
mkdir -p "$ci_cache"
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$ci_cache/mypy}"
export CONFORMANCE_VENV="${CONFORMANCE_VENV:-$ci_cache/conformance-venv}"
export CONFORMANCE_VENV5="${CONFORMANCE_VENV5:-$ci_cache/conformance-venv5}"
if [ -z "${ROCKETLITE_VENV:-}" ]; then
    venv_key="$({ pwd; cat pyproject.toml setup.py; } | cksum | cut -d' ' -f1)"
    export ROCKETLITE_VENV="$ci_cache/venv-$venv_key"
    if [ -d "$ROCKETLITE_VENV" ]; then
        touch "$ROCKETLITE_VENV"
    fi
    # shellcheck disable=SC2012 # the names are ours: venv-<digits>
    old_venvs="$(ls -dt "$ci_cache"/venv-* 2>/dev/null | grep -vxF "$ROCKETLITE_VENV" \
        | tail -n +3)" || true
    while read -r old; do
        [ -z "$old" ] || rm -rf "$old"
    done <<< "$old_venvs"
fi
