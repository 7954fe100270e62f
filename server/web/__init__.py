"""Participant-facing routes (one blueprint each): entry and task pages, the JSON API, withdrawal, lab sessions, the health probe."""
