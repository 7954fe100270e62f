"""Production serving (deploy/): the shipped configs parse and agree with each other, and Caddy with
the shipped site block serves the app over loopback, passing MTurk's frame-ancestors through and
handing the app the client's address (X-Forwarded-For, trusted through HUMANLIKE_PROXY_COUNT).

Docker has no engine on the test machines: the Dockerfile and compose file are checked statically
(they reference files that exist and run the commands the tests run)."""

from __future__ import annotations

import configparser
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
import yaml

from humanlike.deploy import stack
from humanlike.deploy.stack import AppServer, Caddy, caddy_binary, running
from humanlike.server import create_app, database
from humanlike.server.study import experiments
from tests.conftest import ON_CI
from tests.server.conftest import write_small_experiment

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MTURK = "https://www.mturk.com https://workersandbox.mturk.com"


def need_caddy() -> str:
    binary = caddy_binary()
    if binary is None:
        if ON_CI:
            pytest.fail("CI needs caddy for the production-serving tests (make caddy)")
        pytest.skip("caddy is not installed (make caddy installs Debian's)")
    return binary


def caddy_json(binary: str, site: str, upstreams: str, config: Path = DEPLOY / "Caddyfile") -> dict:
    env = dict(os.environ, HUMANLIKE_SITE=site, HUMANLIKE_UPSTREAMS=upstreams)
    out = subprocess.run([binary, "adapt", "--config", str(config), "--adapter", "caddyfile"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.slow
def test_gunicorn_config_takes_its_settings_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HUMANLIKE_BIND", "127.0.0.1:8123")
    monkeypatch.setenv("HUMANLIKE_WORKERS", "3")
    monkeypatch.setenv("HUMANLIKE_THREADS", "5")
    conf = importlib.reload(importlib.import_module("humanlike.deploy.gunicorn_conf"))
    assert (conf.bind, conf.workers, conf.threads, conf.worker_class) == (["127.0.0.1:8123"], 3, 5, "gthread")
    assert conf.wsgi_app == "humanlike.server:create_app()"
    env = dict(os.environ, HUMANLIKE_INSTANCE=str(tmp_path), HUMANLIKE_EXPERIMENTS="")
    check = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "python:humanlike.deploy.gunicorn_conf",
                            "--check-config"], env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-2000:]


@pytest.mark.slow
def test_granian_with_the_shipped_settings_serves_the_app_from_two_worker_processes(tmp_path):
    settings = stack.read_env_file(DEPLOY / "granian.env")
    assert settings["GRANIAN_INTERFACE"] == "wsgi" and settings["GRANIAN_FACTORY"] == "true"
    spec = write_small_experiment(tmp_path / "study")
    env = {"HUMANLIKE_EXPERIMENTS": str(spec), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "SECRET_KEY": "s" * 32, "HUMANLIKE_INSTANCE": str(tmp_path / "instance")}
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": env["DATABASE_URL"],
                      "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(app)
    database.dispose(app)
    with AppServer(env, server="granian", workers=2, threads=2) as server:
        assert len(server.workers()) == 2
        start = httpx.get(f"{server.url}/start/small?PROLIFIC_PID=G1&STUDY_ID=s&SESSION_ID=x")
        assert start.status_code == 302 and "#token=" in start.headers["location"]


def test_shipped_caddyfile_gets_a_certificate_for_the_site_and_balances_over_the_apps():
    binary = need_caddy()
    config = caddy_json(binary, "study.example.org", "127.0.0.1:8001 127.0.0.1:8002")
    server = config["apps"]["http"]["servers"]["srv0"]
    assert server["listen"] == [":443"]  # HTTPS, with Caddy's automatic certificates
    assert "automatic_https" not in server  # not disabled
    assert server["routes"][0]["match"] == [{"host": ["study.example.org"]}]
    proxy = next(h for h in server["routes"][0]["handle"][0]["routes"][0]["handle"]
                 if h["handler"] == "reverse_proxy")
    assert proxy["upstreams"] == [{"dial": "127.0.0.1:8001"}, {"dial": "127.0.0.1:8002"}]
    assert proxy["load_balancing"]["selection_policy"] == {"policy": "least_conn"}
    # passive checks only: a slow answer under load never takes every process out at once
    assert "active" not in proxy["health_checks"]
    assert proxy["health_checks"]["passive"]["max_fails"] == 3
    env = dict(os.environ, HUMANLIKE_SITE="study.example.org")
    valid = subprocess.run([binary, "validate", "--config", str(DEPLOY / "Caddyfile"), "--adapter",
                            "caddyfile"], env=env, capture_output=True, text=True)
    assert valid.returncode == 0 and "Valid configuration" in valid.stdout + valid.stderr


def test_loopback_caddyfile_is_the_shipped_site_block_bound_to_loopback(tmp_path):
    binary = need_caddy()
    derived = stack.loopback_caddyfile((DEPLOY / "Caddyfile").read_text())
    assert derived.endswith((DEPLOY / "Caddyfile").read_text())
    path = tmp_path / "Caddyfile"
    path.write_text(derived)
    config = caddy_json(binary, "http://127.0.0.1:9999", "127.0.0.1:1 127.0.0.1:2", path)
    assert config["admin"] == {"disabled": True}
    assert config["apps"]["http"]["servers"]["srv0"]["listen"] == ["127.0.0.1:9999"]


def test_compose_file_runs_replicas_on_postgresql_with_a_volume_behind_the_proxy():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services, volumes = compose["services"], compose["volumes"]
    assert {"db", "migrate", "app1", "app2", "proxy", "backup"} <= set(services)
    db = services["db"]
    assert db["image"].startswith("postgres:") and "pgdata:/var/lib/postgresql/data" in db["volumes"]
    assert "pgdata" in volumes and "healthcheck" in db
    upstreams = services["proxy"]["environment"]["HUMANLIKE_UPSTREAMS"].split()
    image_cmd = json.loads(next(arg for op, arg in _dockerfile_instructions() if op == "CMD"))
    for upstream in upstreams:
        name, port = upstream.split(":")
        app = services[name]
        assert image_cmd[image_cmd.index("--port") + 1] == port  # granian, the image's default
        assert app["environment"]["HUMANLIKE_BIND"] == f"0.0.0.0:{port}"  # gunicorn, the alternative
        assert app["environment"]["HUMANLIKE_PROXY_COUNT"] == "1"
        assert app["environment"]["DATABASE_URL"].startswith("postgresql://humanlike:")
        assert "@db:5432/humanlike" in app["environment"]["DATABASE_URL"]
        assert app["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert (ROOT / app["build"]["dockerfile"]).is_file()
    assert len(upstreams) == 2
    assert services["migrate"]["command"] == ["humanlike", "db", "upgrade"]
    mounts = dict(v.split(":")[:2] for v in services["proxy"]["volumes"])
    assert mounts["./Caddyfile"] == "/etc/caddy/Caddyfile" and (DEPLOY / "Caddyfile").is_file()
    for named in ("caddy_data", "caddy_config"):
        assert named in mounts and named in volumes
    backup = services["backup"]
    assert "./backup.sh:/usr/local/bin/backup.sh:ro" in backup["volumes"]
    assert backup["image"].split(":")[1].split("-")[0] == db["image"].split(":")[1].split("-")[0]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [tuple(line.split(None, 1)) for line in lines]  # type: ignore[misc]


def test_dockerfile_builds_what_the_tests_run():
    steps = _dockerfile_instructions()
    runs = [arg for op, arg in steps if op == "RUN"]
    assert "make npm" in runs and re.search(r"^npm:", (ROOT / "Makefile").read_text(), re.M)
    install = next(r for r in runs if r.startswith("pip install"))
    extras = re.search(r'"\.\[([\w,]+)\]"', install)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras is None or set(extras.group(1).split(",")) <= set(declared)
    # the default server with the shipped settings: the command and variables the tests run
    cmd = json.loads(next(arg for op, arg in steps if op == "CMD"))
    args, env = stack.app_command(stack.DEFAULT_SERVER, 8000, 2, 4)
    assert cmd[0] == stack.DEFAULT_SERVER and cmd[1:] == args[3:]
    image_env = dict(pair.split("=", 1) for op, arg in steps if op == "ENV" for pair in arg.split())
    shipped = stack.read_env_file(DEPLOY / "granian.env")
    assert {k: v for k, v in image_env.items() if k.startswith("GRANIAN_")} == shipped | {"GRANIAN_HOST": "0.0.0.0"}
    assert {k: v for k, v in env.items() if k in shipped and k != "GRANIAN_HOST"} == {
        k: v for k, v in shipped.items() if k in env and k != "GRANIAN_HOST"}
    assert any(op == "HEALTHCHECK" and "/healthz" in arg for op, arg in steps)
    assert ("USER", "humanlike") in steps
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", "node_modules", "deploy/humanlike.env"} <= set(ignore)


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((DEPLOY / "systemd" / name).read_text())
    return parser


def test_systemd_units_run_the_shipped_config_migrations_first_and_a_daily_backup():
    app = _unit("humanlike@.service")  # the default server, granian
    assert shlex.split(app["Service"]["ExecStart"])[1:] == ["--port", "%i", "humanlike.server:create_app"]
    files = (DEPLOY / "systemd" / "humanlike@.service").read_text()
    assert files.index("deploy/granian.env") < files.index("/etc/humanlike/humanlike.env")  # later wins
    assert "humanlike-migrate.service" in app["Unit"]["Requires"]
    alternative = _unit("humanlike-gunicorn@.service")
    assert shlex.split(alternative["Service"]["ExecStart"])[1:] == ["-c", "python:humanlike.deploy.gunicorn_conf"]
    assert alternative["Service"]["Environment"] == "HUMANLIKE_BIND=127.0.0.1:%i"
    migrate = _unit("humanlike-migrate.service")
    assert shlex.split(migrate["Service"]["ExecStart"])[1:] == ["db", "upgrade"]
    backup = _unit("humanlike-backup.service")
    assert backup["Service"]["ExecStart"].endswith("/deploy/backup.sh")
    timer = _unit("humanlike-backup.timer")
    assert timer["Timer"]["OnCalendar"] == "*-*-* 03:15:00" and timer["Timer"]["Persistent"] == "true"
    dropin = _unit("caddy-humanlike.conf")
    ports = re.findall(r"127\.0\.0\.1:(\d+)", dropin["Service"]["Environment"])
    assert ports == ["8001", "8002"]
    if shutil.which("systemd-analyze"):
        for unit in sorted((DEPLOY / "systemd").glob("*.[st]*[er]")):
            out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
            problems = [line for line in (out.stdout + out.stderr).splitlines()
                        if line.strip() and "is not executable" not in line]
            assert problems == [], (unit.name, problems)


def test_every_file_and_script_named_in_the_deploy_guide_exists():
    guide = (ROOT / "docs" / "deploy.md").read_text()
    named = set(re.findall(r"(?:^|[\s`(]|/opt/humanlike/)(deploy/[\w@.\-/]*\w)", guide, re.M))
    named.discard("deploy/humanlike.env")  # the researcher's copy of deploy/humanlike.env.example
    assert {"deploy/Caddyfile", "deploy/compose.yaml", "deploy/backup.sh", "deploy/restore.sh"} <= named
    missing = [p for p in named if not (ROOT / p).exists()]
    assert missing == []
    assert "pg_dump" in guide and "restore.sh" in guide and "OnCalendar" in guide


@pytest.fixture
def served(tmp_path):
    """The small study on SQLite, one gunicorn instance (one process) behind the loopback Caddy;
    starts limited to 2 per minute per client address. No declared platform: the local default
    takes the MTurk-format and Prolific links the test sends."""
    need_caddy()
    spec = write_small_experiment(tmp_path / "study")
    spec.write_text(spec.read_text().replace('platform = "prolific"\n', ""))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url,
                      "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    database.dispose(app)
    env = {"HUMANLIKE_EXPERIMENTS": str(spec), "DATABASE_URL": url, "SECRET_KEY": "s" * 32,
           "HUMANLIKE_INSTANCE": str(tmp_path / "instance"), "HUMANLIKE_PROXY_COUNT": "1",
           "HUMANLIKE_RATE_LIMITS": "on", "HUMANLIKE_START_RATE_LIMIT": "2 per minute"}
    app_server = AppServer(env, workers=1, threads=4)
    proxy = Caddy([f"127.0.0.1:{app_server.port}"])
    with running(app_server, proxy):
        yield proxy


def client_from(address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127.x.y.z is this machine)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


@pytest.mark.slow
def test_caddy_serves_the_app_with_mturk_frame_ancestors_and_the_client_address(served):
    base = served.url
    with client_from("127.0.0.2") as alice, client_from("127.0.0.3") as bob:
        start = alice.get(f"{base}/start/small?assignmentId=A1&hitId=H1&workerId=W1"
                          "&turkSubmitTo=https://workersandbox.mturk.com")
        assert start.status_code == 302, start.text
        task = alice.get(base + start.headers["location"].split("#")[0])
        assert task.status_code == 200 and "jspsych" in task.text.lower()
        csp = dict(part.strip().split(" ", 1) for part in task.headers["content-security-policy"].split(";"))
        assert csp["frame-ancestors"] == MTURK  # exactly MTurk's, through the proxy
        assert "x-frame-options" not in task.headers
        login = alice.get(f"{base}/admin/login")
        assert "frame-ancestors 'none'" in login.headers["content-security-policy"]
        assert login.headers["x-frame-options"] == "DENY"

        # starts are limited per client address: Alice has used one of her two
        assert alice.get(f"{base}/start/small?PROLIFIC_PID=A2&STUDY_ID=s&SESSION_ID=x").status_code == 302
        limited = alice.get(f"{base}/start/small?PROLIFIC_PID=A3&STUDY_ID=s&SESSION_ID=x")
        assert limited.status_code == 429
        spoofed = alice.get(f"{base}/start/small?PROLIFIC_PID=A4&STUDY_ID=s&SESSION_ID=x",
                            headers={"X-Forwarded-For": "203.0.113.9"})
        assert spoofed.status_code == 429  # Caddy replaces a client's own X-Forwarded-For
        # Bob, another address behind the same proxy, is counted apart (without the forwarded
        # address every request would come from Caddy's 127.0.0.1 and share one count)
        assert bob.get(f"{base}/start/small?PROLIFIC_PID=B1&STUDY_ID=s&SESSION_ID=x").status_code == 302
        health = bob.get(f"{base}/healthz")
        assert health.status_code == 200
