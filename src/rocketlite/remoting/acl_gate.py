"""The ACL check in front of a ``RemotingServer``'s processors (RocketMQ's ACL RPC hook): each
request is checked against ``plain_acl.yml`` before its processor runs; a refused one is answered
NO_PERMISSION with the reason, and nothing of it runs. The file is polled for changes every
``RELOAD_INTERVAL_S`` while the server runs.

``codes`` limits the check to some request codes (the NameServer checks only its writes); None
checks them all (the broker). Signing requests on the client side is ``Connection.signer``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from pathlib import Path

from rocketlite.acl.plain_file import RELOAD_INTERVAL_S, PlainAclFile
from rocketlite.acl.sign import Credentials
from rocketlite.acl.validator import check
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand, text_ext_fields
from rocketlite.remoting.connection import Connection, Signer

log = logging.getLogger(__name__)


class AclGate:
    """A server's ``gate`` over one ``plain_acl.yml``; ``denied`` counts the refusals (Remoting
    and, through ``broker.acl``, the gRPC front's)."""

    def __init__(self, path: Path, *, codes: Collection[int] | None = None,
                 reload_interval_s: float = RELOAD_INTERVAL_S) -> None:
        self.file = PlainAclFile(path)  # raises on a bad file: the server does not start
        self.codes = None if codes is None else frozenset(int(c) for c in codes)
        self.reload_interval_s = reload_interval_s
        self.denied = 0
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """None when ``cmd`` may run, else its NO_PERMISSION answer."""
        if self.codes is not None and cmd.code not in self.codes:
            return None
        reason = check(self.file.config, conn.peer_ip, cmd.code, cmd.ext_fields, cmd.body)
        if reason is None:
            return None
        self.denied += 1
        conn.peer_log.warning(conn.peer_ip, "ACL: refused request %d from %s: %s", cmd.code,
                              conn.peer, reason)
        return cmd.response(ResponseCode.NO_PERMISSION, reason)

    def start(self) -> None:
        """Poll the file for changes on the running loop until ``close``."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.reload_interval_s, self._poll)

    def _poll(self) -> None:
        try:
            self.file.poll()
        except Exception:
            log.exception("ACL file %s: reload failed", self.file.path)
        self._timer = asyncio.get_running_loop().call_later(self.reload_interval_s, self._poll)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def request_signer(credentials: Credentials) -> Signer:
    """A ``Connection.signer`` that signs each request with ``credentials``."""

    def sign(cmd: RemotingCommand) -> None:
        cmd.ext_fields = text_ext_fields(cmd.ext_fields)
        credentials.sign(cmd.ext_fields, cmd.body)

    return sign
