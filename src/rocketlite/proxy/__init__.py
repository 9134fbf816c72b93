"""The gRPC front: RocketMQ 5's ``apache.rocketmq.v2.MessagingService`` served from the broker
process (what Java runs as a separate RocketMQ Proxy), for the official 5.x clients.

An adapter, like the Remoting processors: each RPC decodes its request, calls the broker's
services (topics, the store and its diverters, POP, offsets, transactions, the client managers)
and encodes the answer with a v2 ``Code``. No business rule lives here. Modules:

- ``server``: ``GrpcFront``, the server's lifecycle (``grpcServerPort``, 8081): ``h2``, our own
  HTTP/2 gRPC server (``grpcServerImpl=native``, the default), or grpc.aio (``grpcio``);
  ``config``: ``ProxyConfig``;
- ``service``: ``MessagingServicer``, one method per RPC, each handing over to the module below
  that owns its area;
- ``context``: ``FrontContext`` (what every RPC may use: the broker, the advertised endpoint, the
  sessions, the consumer limits, the renewer) and the request metadata; ``status``: v2 statuses,
  ``FrontError`` and the broker's errors as v2 codes;
- ``route``: QueryRoute, QueryAssignment;
- ``producer``: SendMessage, with ``convert_in`` (v2 Message -> MessageToStore, checked) and
  ``validate`` (field checks); ``transaction``: EndTransaction;
- ``telemetry``: Telemetry, Heartbeat, NotifyClientTermination; ``sessions`` (one per client id),
  ``channels`` (a Telemetry stream as the broker's client channel: orphaned-transaction checks),
  ``settings`` (the Settings the front answers);
- ``consumer``: ReceiveMessage, AckMessage, ChangeInvisibleDuration,
  ForwardMessageToDeadLetterQueue over ``broker.pop``, with ``consume_checks`` (the proxy's
  validations and limits), ``consumer_errors`` (POP errors as v2 codes), ``convert_out`` (stored
  records -> v2 Messages, a batch at a time) and ``renew`` (auto-renewed receipt handles of push
  consumers);
- ``lite_pull``: PullMessage, UpdateOffset, GetOffset, QueryOffset; ``recall``: RecallMessage
  (not supported: answered NOT_IMPLEMENTED with the reason);
- ``pb``: the generated protobuf modules (``scripts/gen_grpc.sh``; do not edit).
"""
