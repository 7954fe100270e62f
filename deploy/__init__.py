"""Recruitment clients (Prolific, MTurk) and production serving."""
