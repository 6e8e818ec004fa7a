"""Thin resolvers: read the caller, call one service method, map the result to a payload."""
