"""What the driver and the executors say to each other: control messages, in-stream events, checkpoints."""
