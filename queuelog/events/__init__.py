"""The change feed that subscriptions follow."""
