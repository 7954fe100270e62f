"""Participant write tokens: created at allocation, stored only as their sha256."""

from __future__ import annotations

import hashlib
import hmac
import secrets


def new_token() -> str:
    """A fresh secret write token (32 random bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Tokens are stored as their sha256; the secret itself lives only in the participant's browser."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token_hash: str, token: str) -> bool:
    """True when ``token`` hashes to ``token_hash`` (constant-time comparison)."""
    return hmac.compare_digest(token_hash, hash_token(token))
