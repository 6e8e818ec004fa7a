"""SQLAlchemy Core storage: tables, migrations and one module of statements per table."""
