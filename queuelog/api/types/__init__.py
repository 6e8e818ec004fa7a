"""Strawberry types of the contract: jobs and keys (`jobs`), the operators' queues (`queues`)."""
