"""The gRPC front: RocketMQ 5's ``apache.rocketmq.v2.MessagingService`` served from the broker
process (what Java runs as a separate RocketMQ Proxy), for the official 5.x clients.

An adapter, like the Remoting processors: each RPC decodes its request, calls the broker's
services (topics, the store, POP, offsets, transactions) and encodes the answer with a v2 ``Code``.
No business rule lives here. Modules:

- ``server``: ``GrpcFront``, the ``grpc.aio`` server's lifecycle (``grpcServerPort``, 8081);
- ``service``: ``MessagingServicer``, one method per RPC, each handing over to the module below
  that owns its area;
- ``context``: ``FrontContext`` (what every RPC may use) and the request metadata;
- ``status``: v2 ``Status`` values and the broker's errors mapped to v2 codes;
- ``route`` (QueryRoute, QueryAssignment), ``producer`` (SendMessage, EndTransaction),
  ``telemetry`` (Telemetry, Heartbeat, NotifyClientTermination, client sessions),
  ``consumer`` (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
  ForwardMessageToDeadLetterQueue), ``lite_pull`` (PullMessage, UpdateOffset, GetOffset,
  QueryOffset), ``recall`` (RecallMessage);
- ``pb``: the generated protobuf modules (``scripts/gen_grpc.sh``; do not edit).
"""
