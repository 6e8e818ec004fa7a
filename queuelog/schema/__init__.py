"""Strawberry types and the assembled Schema."""
