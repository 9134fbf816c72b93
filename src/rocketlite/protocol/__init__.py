"""The Remoting protocol, sans I/O: request and response codes, the RemotingCommand frame codec,
fastjson-compatible JSON, typed headers and bodies. Bytes in, commands out; no asyncio, no sockets."""
