"""The controller costs a plain start nothing: the CLI, broker and NameServer modules load
neither ``rocketlite.controller`` nor its etcd client."""

from __future__ import annotations

import subprocess
import sys


def test_start_paths_do_not_load_the_controller() -> None:
    code = (
        "import sys\n"
        "import rocketlite.cli.main, rocketlite.broker.broker, rocketlite.namesrv.server\n"
        "names = ('aetcd', 'rocketlite.controller')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'aetcd' or m.startswith(names[1])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_controller_loads_its_client() -> None:
    code = "import sys, rocketlite.controller.etcd\nprint('aetcd' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True"
