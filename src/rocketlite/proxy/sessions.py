"""The clients the front knows: one ``ClientSession`` per ``x-mq-client-id``, made by its
Telemetry stream (the settings it reported and the ones the front answered) and kept alive by
heartbeats; dropped on NotifyClientTermination, when its stream ends, or after
``SESSION_IDLE_S`` without a call. Bounded: at most ``MAX_SESSIONS``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rocketlite.proxy.pb import definition_pb2 as pb

MAX_SESSIONS = 10_000
SESSION_IDLE_S = 120.0


@dataclass(slots=True)
class ClientSession:
    client_id: str
    settings: pb.Settings | None = None  # as the client reported them, None before Telemetry
    last_seen: float = field(default_factory=time.monotonic)


class Sessions:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self._by_id: dict[str, ClientSession] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, client_id: str) -> ClientSession | None:
        return self._by_id.get(client_id)

    def touch(self, client_id: str) -> ClientSession:
        """The session of ``client_id``, made if new; ``OverflowError`` past ``limit``."""
        s = self._by_id.get(client_id)
        if s is None:
            if len(self._by_id) >= self.limit:
                raise OverflowError(f"the front already serves {self.limit} clients")
            s = self._by_id[client_id] = ClientSession(client_id)
        s.last_seen = time.monotonic()
        return s

    def remove(self, client_id: str) -> ClientSession | None:
        return self._by_id.pop(client_id, None)

    def expire(self, idle_s: float = SESSION_IDLE_S) -> list[ClientSession]:
        now = time.monotonic()
        gone = [s for s in self._by_id.values() if now - s.last_seen > idle_s]
        for s in gone:
            del self._by_id[s.client_id]
        return gone
