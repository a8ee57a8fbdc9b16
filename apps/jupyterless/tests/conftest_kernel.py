"""Fixtures of the kernel, notebook and browser tests (loaded with ``pytest_plugins = ["conftest_kernel"]``).

``faast_notebook``: one ``./faast notebook`` for the whole session, as a person starts it: the platform serving a copy of
the executor app (a copy, so its storage and platform state are its own, whatever else runs the app), and Debian's
classic notebook server with the JupyterLess kernel. The fixture reads what the command prints (the notebook's URL and
token) and what it writes for its kernels (the private JUPYTER_PATH with the kernelspec, the 0600 config file with the
executor's URL and function key). At the end it sends SIGINT to the command's process group, as Ctrl-C in its terminal
does, and checks that no process of the run is left.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

HOME = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parent
START_DEADLINE = 900  # seconds: a first start on a busy 2-core machine builds nothing but starts Azurite, workers, Jupyter
STOP_DEADLINE = 180


EXECUTOR = HOME / "apps" / "jupyterless" / "executor"


def wait_for(condition, deadline, what, interval=0.25):
    """Polls condition() until it returns something truthy; fails naming what after deadline seconds."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline} s waiting for {what}")
        time.sleep(interval)


def processes_mentioning(text):
    """Pids of the processes whose command line contains text."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((int(entry), cmdline))
    return found


@dataclass
class JupyterLess:
    executor_url: str  # http://127.0.0.1:PORT (the platform's frontend)
    key: str  # the app's function key
    notebook_url: str  # http://127.0.0.1:PORT (the notebook server)
    token: str
    run_dir: Path  # .faast/notebook/PID: jupyter/ (kernelspec), config.json (0600), runtime/
    notebook_dir: Path
    log: Path

    @property
    def config_file(self):
        return self.run_dir / "config.json"

    def kernel_env(self, **extra):
        """The environment a kernel gets from the notebook server: the config file's path, never the key itself."""
        env = dict(os.environ)
        env.pop("JUPYTERLESS_URL", None)
        env.pop("JUPYTERLESS_KEY", None)
        env["JUPYTERLESS_CONFIG"] = str(self.config_file)
        env["JUPYTER_PATH"] = str(self.run_dir / "jupyter")
        env.update(extra)
        return env

    def post(self, function, body, key=None, timeout=300):
        """POSTs JSON to the executor; returns (status, parsed body or text)."""
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["x-functions-key"] = key
        request = urllib.request.Request(f"{self.executor_url}/api/{function}", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


@pytest.fixture(scope="session")
def faast_notebook(tmp_path_factory):
    root = tmp_path_factory.mktemp("jupyterless")
    app = root / "executor"
    shutil.copytree(EXECUTOR, app, ignore=shutil.ignore_patterns(".faast", "__pycache__"))
    notebooks = root / "notebooks"
    shutil.copytree(HOME / "apps" / "jupyterless" / "notebooks", notebooks)
    log = root / "notebook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(HOME / "faast"), "notebook", str(notebooks), "--app", str(app)], cwd=HOME,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    run_dir = HOME / ".faast" / "notebook" / str(proc.pid)
    # The platform's state for this copy (./faast start's: start-APP-<sha256 of the app's path, 8 hex digits>).
    platform_state = HOME / ".faast" / "platform" / f"start-executor-{hashlib.sha256(str(app).encode()).hexdigest()[:8]}"
    try:
        def ready():
            text = log.read_text(errors="replace")
            if proc.poll() is not None:
                raise AssertionError(f"./faast notebook exited with {proc.returncode}:\n{text[-4000:]}")
            opened = re.search(r"open (http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]+)", text)
            executor = re.search(r"the executor at (http://127\.0\.0\.1:\d+)", text)
            return (opened, executor) if opened and executor else None

        opened, executor = wait_for(ready, START_DEADLINE, "./faast notebook to print its URL")
        config = json.loads((run_dir / "config.json").read_text())
        assert config["url"] == executor.group(1)
        served = JupyterLess(executor_url=executor.group(1), key=config["key"], notebook_url=opened.group(1),
                             token=opened.group(2), run_dir=run_dir, notebook_dir=notebooks, log=log)
        yield served
    finally:
        # Ctrl-C in the command's terminal: SIGINT to its process group.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            raise AssertionError(f"./faast notebook did not stop within {STOP_DEADLINE} s of SIGINT")
        # Nothing of the run is left: the notebook server, its kernels (their connection files are in the run
        # folder), the platform and its instances (they name the app's copy).
        marks = [str(root), str(run_dir), str(platform_state)]
        try:
            wait_for(lambda: not any(processes_mentioning(m) for m in marks), 60, "the processes of ./faast notebook to end")
        except AssertionError:
            left = [p for m in marks for p in processes_mentioning(m)]
            raise AssertionError(f"processes left after ./faast notebook stopped: {left}") from None
        finally:
            shutil.rmtree(platform_state, ignore_errors=True)
        assert not run_dir.exists(), f"{run_dir} was not removed"


def write_kernelspec(jupyter_path):
    """The kernelspec ./faast notebook writes, for kernels that need no executor (the lost-runtime and protocol tests)."""
    spec = Path(jupyter_path) / "kernels" / "jupyterless"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/usr/bin/python3", str(HOME / "apps" / "jupyterless" / "kernel" / "jupyterless_kernel.py"),
                 "-f", "{connection_file}"],
        "display_name": "JupyterLess (FaaST)", "language": "python", "interrupt_mode": "signal",
        "metadata": {"debugger": False}, "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1"}}))
    return Path(jupyter_path)


@pytest.fixture
def bare_kernel_env(tmp_path):
    """A kernel's environment without ./faast notebook: the kernelspec in a JUPYTER_PATH of this test's own."""
    jupyter = write_kernelspec(tmp_path / "jupyter")

    def env(**extra):
        e = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERLESS_")}
        e["JUPYTER_PATH"] = str(jupyter)
        e.update(extra)
        return e
    return env
