"""Participants' rights (docs/participants-rights.md): deletion, withdrawal and its ledger, retention, pseudonyms."""
