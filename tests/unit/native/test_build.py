"""The compiled core is there when it must be, and ROCKETLITE_PURE really selects the pure path."""

from __future__ import annotations

import os
import subprocess
import sys

from nativehelp import SRC, extension_names, twin
from rocketlite.common import native


def test_every_pyx_has_a_built_extension() -> None:
    """CI builds every twin (``scripts/test`` sets ROCKETLITE_REQUIRE_NATIVE): a silently failed
    build would otherwise test the pure path twice."""
    names = extension_names()
    assert names, f"no _*_c.pyx under {SRC}"
    for name in names:
        assert twin(name).__file__ is not None


def test_the_selected_path_follows_rocketlite_pure() -> None:
    code = ("from rocketlite.formats import properties as p; from rocketlite.common import native; "
            "print(p.decode_properties.__module__, '|', native.describe())")
    out = {}
    for pure in ("1", "0"):
        env = {**os.environ, "ROCKETLITE_PURE": pure}
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True, timeout=60)
        out[pure] = r.stdout.strip()
    assert out["1"] == "rocketlite.formats.properties | pure Python (ROCKETLITE_PURE is set)"
    assert out["0"].startswith("rocketlite.formats._properties_c | compiled core")


def test_this_run_uses_the_path_it_asked_for() -> None:
    from rocketlite.formats import properties

    compiled = properties.decode_properties is not properties._decode_properties_py
    assert compiled is not native.PURE
    if os.environ.get("ROCKETLITE_REQUIRE_NATIVE") and not native.PURE:
        assert all(why is None for why in native.loaded().values()), native.loaded()
