"""The broker: Remoting processors over the store, topics, consumer offsets and groups."""
