"""SQLite: its dialect (the hot statements as SQLite spells them)."""
