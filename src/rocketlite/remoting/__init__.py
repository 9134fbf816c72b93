"""The Remoting transport on asyncio: a server that dispatches commands to processors by request
code, and a client with per-connection request ids, timeouts and bounded in-flight requests."""
