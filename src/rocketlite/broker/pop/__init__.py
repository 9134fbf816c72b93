"""POP consumption (RocketMQ 5's model): pop, ack, change invisible time, revive, FIFO order.

``service`` holds the API the Remoting processor and the gRPC front call; ``records`` the
checkpoint/ack JSON and the receipt handle; ``revive`` the service that brings unacked messages
back; ``fifo`` the per-queue order state of orderly pops; ``processor`` the Remoting codes."""
