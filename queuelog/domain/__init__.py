"""The rules of the queue that need no database and no framework: the job state machine, the
catalogue of error codes, and which role may do what. It imports nothing of queuelog."""
