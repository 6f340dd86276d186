"""What runs on the executors: a slot per Spark barrier task, a thread per chain subtask, snapshots."""
