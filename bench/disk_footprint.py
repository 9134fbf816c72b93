"""What a store takes on disk under ``rocketlite start``: empty (started, no message) and after one
message (with a UNIQ_KEY, as clients send it, so the IndexFile exists too).

    python bench/disk_footprint.py                       # rocketlite start's sizes
    python bench/disk_footprint.py -c rocketmq.conf      # e.g. mappedFileSizeCommitLog=1073741824,
                                                         # maxHashSlotNum=5000000, maxIndexNum=20000000

Prints apparent size (``du --apparent-size``) and blocks on disk (``du``) of the store, and the
files that take space.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketlite.formats.properties import encode_properties
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import SendMessageRequestHeader
from rocketlite.remoting.client import RemotingClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def du(store: Path, label: str) -> None:
    apparent = subprocess.run(["du", "-sh", "--apparent-size", str(store)], capture_output=True,
                              text=True, check=True).stdout.split()[0]
    real = subprocess.run(["du", "-sh", str(store)], capture_output=True, text=True,
                          check=True).stdout.split()[0]
    print(f"{label:<24} apparent {apparent:>6}   on disk {real:>6}")


async def send_one(addr: str) -> None:
    h = SendMessageRequestHeader(
        producerGroup="PG", topic="FootprintTopic", defaultTopic="TBW102",
        defaultTopicQueueNums=4, queueId=0, sysFlag=0, bornTimestamp=int(time.time() * 1000),
        flag=0, properties=encode_properties({"TAGS": "A", "UNIQ_KEY": "0A00000100002A9F0000"}),
    )
    client = RemotingClient()
    try:
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"hello"), 10)
        if r.code != 0:
            raise SystemExit(f"send failed: {r.code} {r.remark}")
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-c", "--conf", help="broker.conf for rocketlite start")
    ap.add_argument("--dir", help="where to put the store (default: a temporary folder)")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="footprint-"))
    store = root / "store"
    shutil.rmtree(store, ignore_errors=True)
    ns, bp = free_port(), free_port()
    cmd = [sys.executable, "-m", "rocketlite", "start", "--grpc-port", "0", "--store", str(store),
           "--namesrv-port", str(ns), "--broker-port", str(bp), "--log-level", "WARNING"]
    if args.conf:
        cmd += ["-c", args.conf]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "rocketlite ready" in line:
                break
        else:
            raise SystemExit(f"the broker did not start (exit {proc.wait()})")
        time.sleep(1)
        du(store, "empty store")
        asyncio.run(send_one(f"127.0.0.1:{bp}"))
        time.sleep(2)  # the next segment is allocated ahead, on its own thread
        du(store, "one-message store")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    for path in sorted(p for p in store.rglob("*") if p.is_file()):
        blocks = path.stat().st_blocks * 512
        if blocks >= 1 << 20:
            print(f"  {blocks / (1 << 20):8.1f} MiB  {path.relative_to(store)}")
    if not args.dir:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
