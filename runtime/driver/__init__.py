"""The driver's side of a job: the job master, the checkpoint coordinator, Spark launching, restores."""
