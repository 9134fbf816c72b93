"""L0: pure domain types and errors shared by every layer (no I/O)."""
