"""``python tests/chaos/capture_frames.py ARGS``: ``rocketlite ARGS`` recording every byte its
Remoting connections receive, one file per connection under ``$FUZZ_CAPTURE_DIR`` (how the
frame-fuzzing corpus, ``tests/chaos/corpus/``, was captured from ali-ons and the C++ client: see
its README). Not a test module; nothing else uses it.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

from rocketlite.cli.main import main
from rocketlite.remoting.connection import Connection

OUT = Path(os.environ["FUZZ_CAPTURE_DIR"])
_ids = itertools.count()
_received = Connection.data_received


def _recording(self: Connection, data: bytes) -> None:
    path = getattr(self, "_capture_path", None)
    if path is None:
        path = OUT / f"{os.getpid()}-{next(_ids)}.bin"
        self._capture_path = path  # type: ignore[attr-defined]
    with path.open("ab") as f:
        f.write(data)
    _received(self, data)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    Connection.data_received = _recording  # type: ignore[method-assign]
    sys.argv[0] = "rocketlite"
    main()
