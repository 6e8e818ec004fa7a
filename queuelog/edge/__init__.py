"""The HTTP and WebSocket edge: the Starlette app, the GraphQL-over-HTTP view, both WebSocket
subprotocols, uvicorn's settings, health, metrics, logs, tracing, GraphiQL and the dashboard."""
