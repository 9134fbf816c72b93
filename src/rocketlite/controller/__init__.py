"""The controller: who is master of each broker group, kept in etcd (RocketMQ 5's controller
semantics on an existing consensus engine; ARCHITECTURE.md "Controller (etcd)").

Nothing outside this package imports it unless ``--controller etcd://...`` asks for it: it loads
``aetcd`` and gRPC, which a plain ``rocketlite start`` must not pay for. Modules: ``state``
(dataclasses and their JSON), ``etcd`` (the operations, each one etcd transaction),
``watcher`` (elections when a master's lease ends).
"""
