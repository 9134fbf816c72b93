"""Access control as RocketMQ 4.x speaks it (``plain_acl.yml``, the ``AccessKey``/``Signature``
ext fields): the pure parts (signatures, permissions, address patterns, the file's schema and its
reload by modification time), below the network layers so the broker, the NameServer and the
clients share them."""
