# Sourced by scripts/start and scripts/test: makes .venv (once) and installs the project into it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ROCKETLITE_VENV:-$root/.venv}"
extras="${1:-}"
stamp="$venv/.installed${extras:+-$extras}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# Install (again) when the project's metadata or a compiled twin's source changed since the last
# install: pip install -e builds the extensions in place.
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/setup.py" -nt "$stamp" ] \
        || [ -n "$(find "$root/src" \( -name '_*_c.pyx' -o -name '*.pxd' \) -newer "$stamp" -print -quit)" ]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e "$root${extras:+[$extras]}"
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
