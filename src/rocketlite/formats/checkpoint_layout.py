"""The ``checkpoint`` file: 4 KiB, of which the first 40 bytes are used (``StoreCheckpoint.java``).

======  =====================  =====  ===============================================
offset  field                  bytes  notes
======  =====================  =====  ===============================================
0       physicMsgTimestamp     8      store time of the last CommitLog record flushed
8       logicsMsgTimestamp     8      store time of the last record whose ConsumeQueue
                                      units were flushed
16      indexMsgTimestamp      8      store time of the last record in a flushed IndexFile
24      masterFlushedOffset    8      RocketMQ 5.x; kept at 0 here
32      confirmPhyOffset       8      RocketMQ 5.x; CommitLog offset known to be durable
======  =====================  =====  ===============================================

Seed S7 defines the first 24 bytes; the two 5.x fields follow so that a Java broker reads the file.
"""

from __future__ import annotations

import struct

CHECKPOINT = struct.Struct(">qqqqq")
CHECKPOINT_USED_SIZE = 40
CHECKPOINT_FILE_SIZE = 4096
