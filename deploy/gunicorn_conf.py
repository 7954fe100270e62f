"""gunicorn settings for production (``gunicorn -c python:humanlike.deploy.gunicorn_conf``).

Each setting reads an environment variable so that the compose file, the systemd units and the
tests run this one file: ``HUMANLIKE_BIND`` (default 127.0.0.1:8000), ``HUMANLIKE_WORKERS``
(default: the number of cores), ``HUMANLIKE_THREADS`` (4: a thread waiting on PostgreSQL leaves the
GIL to another). The app sits behind Caddy, which terminates TLS and sets X-Forwarded-For; the app
trusts it through ``HUMANLIKE_PROXY_COUNT`` (server/security.py), so gunicorn's own
forwarded-header handling stays off.
"""

from __future__ import annotations

import os

wsgi_app = "humanlike.server:create_app()"
bind = os.environ.get("HUMANLIKE_BIND", "127.0.0.1:8000").split()
workers = int(os.environ.get("HUMANLIKE_WORKERS", str(os.cpu_count() or 1)))
worker_class = "gthread"
threads = int(os.environ.get("HUMANLIKE_THREADS", "4"))
keepalive = 30  # Caddy keeps its upstream connections open; match its idle timeout
timeout = 30  # a worker silent this long is restarted (a trial takes milliseconds)
graceful_timeout = int(os.environ.get("HUMANLIKE_GRACEFUL_TIMEOUT", "20"))
max_requests = 20000  # recycle workers now and then (bounded memory growth), with jitter so
max_requests_jitter = 2000  # that they do not all restart at once
forwarded_allow_ips = ""  # ProxyFix in the app reads the proxy headers, not gunicorn
loglevel = os.environ.get("HUMANLIKE_LOG_LEVEL", "info")
accesslog = os.environ.get("HUMANLIKE_ACCESS_LOG") or None  # "-" for stdout; Caddy logs requests
errorlog = "-"
