"""API keys, the Principal, and the permission rules of the GraphQL fields."""
