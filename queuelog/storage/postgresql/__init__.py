"""PostgreSQL: its dialect (the hot statements as PostgreSQL spells them)."""
