"""``plain_acl.yml`` as a broker or NameServer holds it: loaded at start (a bad file stops the
start), then reloaded by ``poll`` whenever its modification time or size changes (the owner calls
``poll`` on a timer: no thread here). A file that no longer loads keeps the last good
configuration in force and logs why, once per change of the file."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rocketlite.acl.config import AclConfig, load_acl
from rocketlite.common.errors import FormatError

log = logging.getLogger(__name__)

RELOAD_INTERVAL_S = 1.0
"""How often owners poll the file (RocketMQ's watcher checks every 500 ms to a few seconds)."""


def acl_path(configured: str | None = None) -> Path:
    """The ACL file: ``configured`` if given, else ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (as
    RocketMQ), ``./conf/plain_acl.yml`` without ``ROCKETMQ_HOME``."""
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("ROCKETMQ_HOME") or ".") / "conf" / "plain_acl.yml"


class PlainAclFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp = self._stat()
        self.config: AclConfig = load_acl(path)  # raises: a broker does not start on a bad file
        self.reloads = 0
        self.last_error: str | None = None

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def poll(self) -> bool:
        """Reload if the file changed since the last look; True when a new configuration is in
        force. A file that fails to load (or vanished) leaves the last good one in force."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            config = load_acl(self.path)
        except (OSError, FormatError) as e:
            self.last_error = str(e)
            log.error("ACL file %s not reloaded, the previous configuration stays in force: %s",
                      self.path, e)
            return False
        self.config = config
        self.reloads += 1
        self.last_error = None
        log.info("ACL file %s reloaded: %d account(s), %d global white address pattern(s)",
                 self.path, len(config.accounts), len(config.global_white))
        return True
