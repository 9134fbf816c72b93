"""WriteGate: why the store refuses writes right now, one reason per source.

Sources: ``disk`` (retention: use above diskSpaceWarningLevelRatio), ``commitlog`` (the next
CommitLog segment could not be allocated ahead), ``dispatch`` (the dispatcher could not write a
ConsumeQueue or the index, or could not reserve their blocks ahead). Appends check ``reason``
(one attribute read); readers never look at it. A refusal may carry a ``retry``: the retention
thread calls ``retry`` every second while one is pending, so writes resume by themselves once
space returns; the others clear when their source succeeds again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketlite.common.errors import StoreError

log = logging.getLogger(__name__)

Retry = Callable[[], None]


class WriteGate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refusals: dict[str, tuple[str, Retry | None]] = {}
        self.reason: str | None = None  # the first refusal's reason; None: writes are allowed

    def refuse(self, source: str, reason: str, retry: Retry | None = None) -> None:
        """Refuse writes because of ``source`` (logged once, when it starts)."""
        with self._lock:
            new = source not in self._refusals
            self._refusals[source] = (reason, retry)
            self._update()
        if new:
            log.error("refusing writes: %s", reason)

    def clear(self, source: str, only: tuple[str, Retry | None] | None = None) -> None:
        """Lift the refusal of ``source`` (with ``only``: if it is still that very refusal, not
        one made again meanwhile)."""
        with self._lock:
            if only is not None and self._refusals.get(source) is not only:
                return
            was = self._refusals.pop(source, None)
            self._update()
        if was is not None:
            if self.reason is None:
                log.warning("%s: space is back, writes resume", source)
            else:
                log.warning("%s: space is back, writes are still refused: %s", source,
                            self.reason)

    def refused(self, source: str) -> bool:
        return source in self._refusals

    @property
    def retry_pending(self) -> bool:
        with self._lock:  # other threads refuse and clear meanwhile
            return any(retry is not None for _, retry in self._refusals.values())

    def retry(self) -> None:
        """Run every pending retry; a retry that succeeds clears its source, unless the source
        was refused again while it ran."""
        with self._lock:
            pending = [(s, entry) for s, entry in self._refusals.items() if entry[1] is not None]
        for source, entry in pending:
            fn = entry[1]
            if fn is None:  # (filtered above; for the type checker)
                continue
            try:
                fn()
            except StoreError as e:
                with self._lock:
                    if self._refusals.get(source) is entry:
                        self._refusals[source] = (str(e), fn)
                        self._update()
                continue
            except Exception:
                log.exception("retrying %s failed", source)
                continue
            self.clear(source, entry)

    def _update(self) -> None:
        self.reason = next(iter(self._refusals.values()))[0] if self._refusals else None
