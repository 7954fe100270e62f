"""Jinja templates, shipped as package data."""
