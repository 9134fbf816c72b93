"""L0: byte formats shared by the store, the broker and the clients. Pure: bytes in, bytes out."""
