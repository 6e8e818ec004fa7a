"""The GraphQL API: the strawberry types, the resolvers, the assembled schema with its
extensions and limits, and the prepared-operation fast path."""
