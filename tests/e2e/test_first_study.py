"""docs/first-study.md works as written: its files (each fenced block after a
``<!-- file: PATH -->`` line) are the shipped docs/first-study/ folder, and its ``console`` commands
run in order in an empty folder (serve in the background on a free port), each exiting 0, ending
with the rehearsal's export and report."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "first-study.md"
FOLDER = ROOT / "docs" / "first-study"
FILE_BLOCK = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<text>.*?)```", re.S)
CONSOLE_BLOCK = re.compile(r"```console\n(?P<text>.*?)```", re.S)


def page_files() -> dict[str, str]:
    """{path in the study folder: text} of the page's marked blocks."""
    return {m["path"]: m["text"] for m in FILE_BLOCK.finditer(PAGE.read_text())}


def page_commands() -> list[str]:
    """The page's console commands (``$ `` lines), in order."""
    [block] = CONSOLE_BLOCK.findall(PAGE.read_text())
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_pages_files_are_the_shipped_folder():
    files = page_files()
    assert {"experiment.toml", "consent.md", "instructions.md", "stimuli/manifest.csv",
            "models/model_responses.csv"} == set(files)
    for path, text in files.items():
        assert (FOLDER / path).read_text() == text, f"docs/first-study/{path} differs from the page"
    manifest = files["stimuli/manifest.csv"].splitlines()[1:]
    for row in manifest:
        image = FOLDER / "stimuli" / row.split(",")[0]
        assert image.is_file() and image.stat().st_size < 1000


def _run(command: str, prelude: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-c", f"{prelude}\n{command}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wait_until_up(url: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stdout.read() if server.stdout else "serve exited"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.3)
    raise AssertionError(f"serve did not answer {url} within 60 s")


def test_the_pages_commands_run_from_check_to_report(tmp_path):
    study = tmp_path / "first-study"
    for path, text in page_files().items():
        (study / path).parent.mkdir(parents=True, exist_ok=True)
        (study / path).write_text(text)
    for image in FOLDER.glob("stimuli/*/*.png"):
        target = study / image.relative_to(FOLDER)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image, target)
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HUMANLIKE_INSTANCE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    exports: list[str] = []
    outputs: dict[str, str] = {}
    server = None
    try:
        for command in page_commands():
            command = command.replace("5000", port)
            name = command.split()[1] if command.startswith("humanlike ") else command.split()[0]
            if command.startswith("export "):
                exports.append(command)
            elif command.endswith("&"):  # the server: started here, stopped at the end
                assert name == "serve", command
                server = subprocess.Popen(["bash", "-c", "\n".join([*exports, f"exec {command[:-1]}"])],
                                          cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True)
                _wait_until_up(f"http://127.0.0.1:{port}/healthz", server)
            elif command.startswith("kill "):
                assert server is not None and server.poll() is None
            else:
                started = time.monotonic()
                outputs[name] = _run(command, "\n".join(exports), tmp_path, env)
                print(f"{time.monotonic() - started:5.1f} s  {command}")
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    assert set(outputs) >= {"check", "db", "create-admin", "simulate", "export", "report"}
    assert ("observer: model 'shape_model' (6 of 6 rated or classified stimuli)"
            in outputs["simulate"])
    assert ("model responses (the spec's [panel] model_responses): "
            "first-study/models/model_responses.csv") in outputs["simulate"]
    assert "4 simulated participants completed first-study" in outputs["simulate"]
    assert (tmp_path / "rehearsal.db").is_file()  # the rehearsal's own database
    participants = (tmp_path / "rehearsal-export" / "participants.csv").read_text()
    assert len(participants.strip().splitlines()) == 1 + 4
    report = (tmp_path / "rehearsal-report.html").read_text()
    assert "shape_model" in report and "coin_flip" in report
