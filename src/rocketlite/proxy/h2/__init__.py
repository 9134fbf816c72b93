"""The native gRPC server of the front (``grpcServerImpl=native``): HTTP/2 and gRPC's framing on
an asyncio Protocol, a fraction of grpc.aio's CPU per call.

``frames``: the frame and message codec (with a compiled twin, ``_frames_c``); ``stream``: one
call's input, output and end; ``connection``: one client's connection (settings, flow control,
HPACK, limits, errors); ``server``: listening, method dispatch and the servicer's context."""
