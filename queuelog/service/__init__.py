"""The job service: the rules of the queue."""
