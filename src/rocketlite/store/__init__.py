"""L1: the storage engine. Synchronous, thread-based, no network: imports only common and formats."""
