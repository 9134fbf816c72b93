"""POP consumption (RocketMQ 5's model): pop, ack, change invisible time, revive, FIFO order.

``service`` holds the API the Remoting processor and the gRPC front call (``acks`` its ack side);
``records`` the checkpoint/ack JSON and the receipt handle; ``messages`` the messages the path
writes (CKs, acks, retries, dead letters); ``revive`` the service that brings unacked messages
back; ``polling`` the long polling of pops; ``fifo`` the per-queue order state of orderly pops;
``processor`` the Remoting codes; ``errors`` what the API raises."""
