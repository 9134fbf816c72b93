# Sourced by the CI entry points (.ci/run, .ci/conformance). Each CI run is a fresh clone; what
# does not depend on the clone's own files is kept between runs on one machine, outside the clone,
# in $ROCKETLITE_CI_CACHE (default ~/.cache/rocketlite-ci); a fresh machine starts cold, and the
# project's own venv is always built in the clone:
#   mypy/                 mypy's incremental cache (a module whose source hash changed is checked
#                         again; cold, mypy takes about 45 s)
#   conformance-venv*/    the conformance clients' virtual environments (scripts/conformance_setup.sh:
#                         their stamps name the pins, the constraints' checksum and the Python, so
#                         a change reinstalls)
# A variable already set (MYPY_CACHE_DIR, CONFORMANCE_VENV, CONFORMANCE_VENV5) wins.
ci_cache="${ROCKETLITE_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocketlite-ci}"
mkdir -p "$ci_cache"
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$ci_cache/mypy}"
export CONFORMANCE_VENV="${CONFORMANCE_VENV:-$ci_cache/conformance-venv}"
export CONFORMANCE_VENV5="${CONFORMANCE_VENV5:-$ci_cache/conformance-venv5}"
