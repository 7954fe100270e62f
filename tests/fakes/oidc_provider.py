"""A fake OpenID Connect provider for the sign-in tests (issue 40 item 3): one registered client,
one test person who always consents, ID tokens signed RS256 by a key generated for the test. Every
request is checked against the documents it implements, and anything they forbid is refused:

- Discovery (OpenID Connect Discovery 1.0 §3, §4): ``/.well-known/openid-configuration`` gives the
  issuer (equal to the URL it is served under), the endpoints, ``response_types_supported``,
  ``subject_types_supported``, ``id_token_signing_alg_values_supported`` (RS256),
  ``code_challenge_methods_supported`` (S256, RFC 8414 §2) and the token endpoint's client
  authentication (``client_secret_basic``).
- Authorization endpoint (OpenID Connect Core 1.0 §3.1.2.1-§3.1.2.2; RFC 6749 §4.1.1): ``scope``
  contains ``openid``, ``response_type`` is ``code``, ``client_id`` is the registered client and
  ``redirect_uri`` matches a registered URI by simple string comparison (Core §3.1.2.1); an unknown
  client or redirect URI is answered with an error page and never redirected to (RFC 6749
  §4.1.2.1). PKCE is required: ``code_challenge`` of 43 characters with ``code_challenge_method``
  S256 (RFC 7636 §4.2-§4.3; "plain" refused, §4.4.1 ``invalid_request``); ``state`` and ``nonce``
  are required here (the client under test always sends both; Core §3.1.2.1 lets a provider
  insist). Errors go back to the redirect URI with ``error`` and the request's ``state``
  (RFC 6749 §4.1.2.1). The code is single use, short-lived and bound to the client, redirect URI,
  challenge and nonce (RFC 6749 §4.1.2, §10.5).
- Token endpoint (RFC 6749 §3.2, §4.1.3, §5.1-§5.2; Core §3.1.3.1-§3.1.3.3): POST, form-encoded;
  the client authenticates with HTTP Basic (``client_secret_basic``, RFC 6749 §2.3.1, values
  form-urlencoded before base64) or is refused 401 ``invalid_client`` with ``WWW-Authenticate``;
  ``grant_type`` ``authorization_code``; the code was issued to this client, is unused and
  unexpired, and ``redirect_uri`` is identical to the authorization request's (else
  ``invalid_grant``); ``code_verifier`` is 43-128 unreserved characters and
  BASE64URL(SHA256(verifier)) equals the challenge (RFC 7636 §4.1, §4.6; else ``invalid_grant``).
  A second use of a code is refused (RFC 6749 §4.1.2). The answer is JSON with ``access_token``,
  ``token_type`` Bearer, ``expires_in`` and ``id_token``, with ``Cache-Control: no-store``
  (RFC 6749 §5.1).
- ID token (Core §2, §3.1.3.6-§3.1.3.7): ``iss``, ``sub``, ``aud`` (the client id), ``exp``,
  ``iat``, ``auth_time``, the request's ``nonce``, ``email`` and ``email_verified``; JWS RS256 with
  the ``kid`` of the key in the JWKS (RFC 7517, ``/jwks``).

Test knobs: ``person`` (the claims of whoever signs in), ``nonce_override`` (an ID token with
another nonce), ``signing_key`` (sign with a key the JWKS does not hold, under the same ``kid``).
``requests`` records every request's path for the tests to inspect."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode

from flask import Flask, jsonify, redirect, request
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from werkzeug.serving import make_server

VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
"""RFC 7636 §4.1: code_verifier = 43*128unreserved."""
CHALLENGE = re.compile(r"^[A-Za-z0-9\-_]{43}$")
"""RFC 7636 §4.2: BASE64URL(SHA256(...)) without padding is 43 characters."""
KID = "test-key-1"


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str
    person: dict[str, Any]
    expires: float
    used: bool = False


@dataclass
class FakeProvider:
    """The provider's state: its client registration, its key, the codes it issued."""

    client_id: str = "humanlike-test"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    redirect_uris: list[str] = field(default_factory=list)
    person: dict[str, Any] = field(default_factory=lambda: {
        "sub": "248289761001", "email": "bob@lab.example", "email_verified": True,
        "name": "Bob Example"})
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, {"kid": KID, "use": "sig", "alg": "RS256"}))
    signing_key: RSAKey | None = None
    nonce_override: str | None = None
    issuer: str = ""
    codes: dict[str, Grant] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def app(self) -> Flask:
        app = Flask("fake_oidc_provider")
        app.add_url_rule("/.well-known/openid-configuration", view_func=self.discovery)
        app.add_url_rule("/authorize", view_func=self.authorize)
        app.add_url_rule("/token", view_func=self.token, methods=["POST"])
        app.add_url_rule("/jwks", view_func=self.jwks)
        app.before_request(lambda: self.requests.append(request.path))
        return app

    def discovery(self):
        return jsonify({
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "email", "profile"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code"],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce",
                                 "email", "email_verified", "name"],
        })

    def jwks(self):
        return jsonify(KeySet([self.key]).as_dict(private=False))

    def authorize(self):
        q = request.args
        if q.get("client_id") != self.client_id:
            return "unknown client_id (RFC 6749 §4.1.2.1: not redirected)", 400
        redirect_uri = q.get("redirect_uri", "")
        if redirect_uri not in self.redirect_uris:
            return f"redirect_uri {redirect_uri!r} is not registered (RFC 6749 §4.1.2.1)", 400
        state = q.get("state")

        def error(code: str, why: str):
            params = {"error": code, "error_description": why} | ({"state": state} if state else {})
            return redirect(f"{redirect_uri}?{urlencode(params)}")

        if q.get("response_type") != "code":
            return error("unsupported_response_type", "only the authorization code flow")
        if "openid" not in q.get("scope", "").split():
            return error("invalid_scope", "scope must contain openid (Core §3.1.2.1)")
        if not state:
            return error("invalid_request", "state is required here")
        if not q.get("nonce"):
            return error("invalid_request", "nonce is required here")
        if q.get("code_challenge_method") != "S256" or not CHALLENGE.match(q.get("code_challenge", "")):
            return error("invalid_request", "PKCE with S256 is required (RFC 7636 §4.3, §4.4.1)")
        code = secrets.token_urlsafe(24)
        self.codes[code] = Grant(self.client_id, redirect_uri, q["code_challenge"], q["nonce"],
                                 dict(self.person), time.time() + 60)
        return redirect(f"{redirect_uri}?{urlencode({'code': code, 'state': state})}")

    def token(self):
        def error(code: str, why: str, status: int = 400):
            resp = jsonify(error=code, error_description=why)
            resp.status_code = status
            resp.headers["Cache-Control"] = "no-store"
            if status == 401:
                resp.headers["WWW-Authenticate"] = 'Basic realm="fake-oidc"'
            return resp

        if not request.content_type or not request.content_type.startswith(
                "application/x-www-form-urlencoded"):
            return error("invalid_request", "the token request is form-encoded (RFC 6749 §4.1.3)")
        auth = request.headers.get("Authorization", "")
        try:
            user, _, secret = base64.b64decode(auth.removeprefix("Basic "), validate=True
                                               ).decode().partition(":")
        except ValueError:
            user, secret = "", ""
        if not auth.startswith("Basic ") or (unquote(user), unquote(secret)) != (
                self.client_id, self.client_secret):
            return error("invalid_client", "client authentication failed (RFC 6749 §2.3.1)", 401)
        form = request.form
        if form.get("grant_type") != "authorization_code":
            return error("unsupported_grant_type", "only authorization_code")
        grant = self.codes.get(form.get("code", ""))
        if grant is None or grant.used or grant.expires < time.time() \
                or grant.client_id != self.client_id:
            return error("invalid_grant", "unknown, used or expired code (RFC 6749 §4.1.2)")
        grant.used = True
        if form.get("redirect_uri") != grant.redirect_uri:
            return error("invalid_grant", "redirect_uri differs from the authorization request")
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
        if not VERIFIER.match(verifier) or digest.decode() != grant.challenge:
            return error("invalid_grant", "code_verifier does not match (RFC 7636 §4.6)")
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300,
                  "auth_time": now, "nonce": self.nonce_override or grant.nonce} | grant.person
        id_token = jwt.encode({"alg": "RS256", "kid": KID}, claims, self.signing_key or self.key)
        resp = jsonify(access_token=secrets.token_urlsafe(24), token_type="Bearer",
                       expires_in=300, id_token=id_token)
        resp.headers["Cache-Control"] = "no-store"
        return resp


class Serving:
    """The fake provider on a free local port in a thread (as ``tests.e2e.conftest.LiveServer``)."""

    def __init__(self, provider: FakeProvider):
        self.provider = provider
        self.server = make_server("127.0.0.1", 0, provider.app(), threaded=True)
        provider.issuer = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(5)
