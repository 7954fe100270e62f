"""Message catalogues of the participant pages (docs/translations.md), shipped as package data."""
