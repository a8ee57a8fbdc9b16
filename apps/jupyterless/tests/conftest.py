"""JupyterLess executor tests. The unit tests import the app's `jupyterless` package (the executor folder is
put on sys.path, as the Python worker puts the app folder). The platform tests use the session fixture
`platform`: `./faast start apps/jupyterless/executor --port 0` in this checkout, the app's Azurite data in a
temp dir (--azurite-data), its function key read from the app's storage, everything stopped at the end."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
JUPYTERLESS = os.path.dirname(TESTS)
EXECUTOR = os.path.join(JUPYTERLESS, "executor")
ROOT = os.path.dirname(os.path.dirname(JUPYTERLESS))  # the checkout
APP = os.path.relpath(EXECUTOR, ROOT)
sys.path.insert(0, EXECUTOR)
# azure.functions as the worker provides it (func.InputStream for the unit tests).
sys.path.insert(1, os.path.join(ROOT, "workers", "python"))

START_TIMEOUT_S = float(os.environ.get("JUPYTERLESS_START_TIMEOUT_S", "600"))  # includes a first build


@dataclass
class Platform:
    url: str  # http://127.0.0.1:PORT (no trailing slash)
    key: str  # a host function key: opens Execute and Reset
    log: str  # the platform's output


def _served_url(log_path: str):
    with open(log_path, encoding="utf-8", errors="replace") as f:
        m = re.search(r"is served at (http://\S+?)/? ", f.read())
    return m.group(1).rstrip("/") if m else None


def _function_key() -> str:
    # Keys live in the app's storage: azure-webjobs-secrets/HOSTID/host.json (HOSTID: the folder's name).
    out = subprocess.run(["./faast", "blob", "get", APP, "azure-webjobs-secrets/executor/host.json"],
                         cwd=ROOT, capture_output=True, timeout=300, check=True).stdout
    return json.loads(out)["functionKeys"][0]["value"]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # the platform stops its instances, workers and Azurites
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group this fixture started, nothing else
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def platform():
    tmp = tempfile.TemporaryDirectory(prefix="jupyterless-tests-")
    log_path = os.path.join(tmp.name, "platform.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(["./faast", "start", APP, "--port", "0",
                             "--azurite-data", os.path.join(tmp.name, "azurite")],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        url = None
        while url is None:
            if proc.poll() is not None:
                raise RuntimeError(f"./faast start {APP} exited with {proc.returncode}:\n"
                                   + open(log_path, errors="replace").read()[-4000:])
            if time.monotonic() > deadline:
                raise RuntimeError(f"./faast start {APP} did not serve within {START_TIMEOUT_S} s:\n"
                                   + open(log_path, errors="replace").read()[-4000:])
            time.sleep(0.5)
            url = _served_url(log_path)
        yield Platform(url=url, key=_function_key(), log=log_path)
    finally:
        _stop(proc)
        log.close()
        tmp.cleanup()


def post(url: str, body, key=None, timeout: float = 120):
    """(status, parsed JSON or text) of a POST with a JSON body."""
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    if key:
        req.add_header("x-functions-key", key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")
