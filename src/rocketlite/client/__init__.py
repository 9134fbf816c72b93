"""rocketlite's own RocketMQ client: Remoting protocol, asyncio first, with a thin sync wrapper.

Works against rocketlite and, by the protocol, against Apache RocketMQ 4.x/5.x brokers.
"""
