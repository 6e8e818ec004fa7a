"""The rules of the queue that need no database and no framework: the job state machine.
It imports nothing of queuelog."""
