"""The data plane: input gates, local and remote channels (Arrow IPC over TCP), record writers, codecs."""
