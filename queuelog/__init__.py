"""queuelog: a persistent background-job queue served as a GraphQL API."""
