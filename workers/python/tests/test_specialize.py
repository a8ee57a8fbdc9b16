"""Standby and specialisation: a worker started before its app is known takes the app's
environment, directory and capabilities from FunctionEnvironmentReloadRequest."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import (FAILURE, SUCCESS, App, FakeHost, Session, connect, http,
                      shm_capabilities)


def standby(host: FakeHost, spawn, tmp_path: Path, env=None):
    """A worker started in a folder of its own with no app, through init."""
    standby_dir = tmp_path / "standby"
    standby_dir.mkdir()
    worker = spawn(standby_dir, env)
    connect(host, worker)
    init = host.init(Path(""))
    assert init.result.status == SUCCESS
    return worker


def test_a_standby_worker_takes_the_apps_environment_directory_and_modules_on_reload(
        host: FakeHost, spawn, tmp_path: Path) -> None:
    worker = standby(host, spawn, tmp_path, env={"STANDBY_ONLY": "1"})
    app = App(tmp_path / "app")
    app.write("shared_code.py", "GREETING = 'from the app root'\n")
    reply = host.reload(app.root, {"APP_SETTING": "set by the app"})
    assert reply.result.status == SUCCESS, reply.result.exception.message
    assert reply.capabilities["concurrent"] == "1"
    session = Session(host, worker, app)
    session.add_function("Env", """
        import json, os, shared_code
        def main(req):
            return json.dumps({"setting": os.environ.get("APP_SETTING"),
                               "standby": os.environ.get("STANDBY_ONLY"),
                               "cwd": os.getcwd(), "greeting": shared_code.GREETING})
    """)
    out = session.call("Env", req=http())
    assert out.result.status == SUCCESS, out.result.exception.message
    seen = json.loads(out.return_value.string)
    assert seen == {"setting": "set by the app", "standby": None,
                    "cwd": str(app.root), "greeting": "from the app root"}


def test_reload_offers_the_apps_shared_memory_and_the_worker_accepts_it(
        host: FakeHost, spawn, tmp_path: Path, shm_dir: Path) -> None:
    standby(host, spawn, tmp_path)
    app = App(tmp_path / "app")
    reply = host.reload(app.root, {}, shm_capabilities(shm_dir))
    assert reply.result.status == SUCCESS, reply.result.exception.message
    assert reply.capabilities["shared_memory"] == "1"


def test_reload_takes_the_apps_thread_pool_size(host: FakeHost, spawn, tmp_path: Path) -> None:
    worker = standby(host, spawn, tmp_path, env={"PYTHON_THREADPOOL_THREAD_COUNT": "8"})
    app = App(tmp_path / "app")
    reply = host.reload(app.root, {"PYTHON_THREADPOOL_THREAD_COUNT": "1"})
    assert reply.result.status == SUCCESS
    session = Session(host, worker, app)
    session.add_function("Which", """
        import threading, time
        def main(req):
            time.sleep(0.05)
            return threading.current_thread().name
    """)
    ids = [host.invoke("Which", {"req": http()}) for _ in range(6)]
    names = {host.response(i).return_value.string for i in ids}
    assert names == {"faast-fn-0"}


def test_reload_to_a_missing_app_directory_fails_naming_it(
        host: FakeHost, spawn, tmp_path: Path) -> None:
    standby(host, spawn, tmp_path)
    missing = tmp_path / "no-such-app"
    reply = host.reload(missing, {})
    assert reply.result.status == FAILURE
    assert str(missing) in reply.result.exception.message
    assert "FileNotFoundError" in reply.result.exception.message
