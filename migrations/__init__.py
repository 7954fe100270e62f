"""Alembic migrations (Flask-Migrate), shipped as package data."""
