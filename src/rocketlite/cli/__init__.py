"""L5: command-line entry points; the only layer that reads argv and the environment."""
