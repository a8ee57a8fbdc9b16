"""Connection lifecycle: handshake, loading, termination, host loss."""
from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

from conftest import FAILURE, IN, PYTHON, SUCCESS, WORKER_PY, FakeHost, connect, http


def test_init_handshake(host: FakeHost, spawn, tmp_path: Path) -> None:
    worker = spawn()
    start = connect(host, worker)
    assert start.worker_id == worker.worker_id
    init = host.init(tmp_path / "app")
    assert init.result.status == SUCCESS
    assert init.worker_version
    assert dict(init.capabilities) == {"concurrent": "1"}


def test_init_echoes_request_id(host: FakeHost, spawn, tmp_path: Path) -> None:
    from conftest import pb
    connect(host, spawn())
    msg = pb.StreamingMessage(request_id="my-init-42")
    msg.worker_init_request.function_app_directory = str(tmp_path / "app")
    msg.worker_init_request.capabilities["shared_memory"] = "1"
    host.send(msg)
    reply = host.recv_kind("worker_init_response")
    assert reply.request_id == "my-init-42"
    assert "shared_memory" not in reply.worker_init_response.capabilities


def test_load_success_and_invoke(session) -> None:
    resp = session.add_function("Hello", """
        def main(req):
            return "hi"
    """)
    assert resp.function_id == "Hello"
    assert resp.result.status == SUCCESS
    out = session.call("Hello", req=http())
    assert out.result.status == SUCCESS
    assert out.return_value.string == "hi"


def test_load_failure_missing_file(session) -> None:
    missing = session.app.root / "Ghost" / "__init__.py"
    resp = session.host.load("Ghost", "Ghost", missing.parent, missing,
                             {"req": ("httpTrigger", IN)})
    assert resp.result.status == FAILURE
    message = resp.result.exception.message
    assert "'Ghost'" in message and str(missing) in message and "not found" in message
    # Invoking a function that failed to load fails with the load error.
    out = session.call("Ghost", req=http())
    assert out.result.status == FAILURE
    assert "not found" in out.result.exception.message


def test_load_failure_syntax_error(session) -> None:
    resp = session.add_function("Broken", """
        def main(req):
            return (1 +
        x = 3
    """, expect_success=False)
    assert resp.result.status == FAILURE
    message = resp.result.exception.message
    script = session.app.root / "Broken" / "__init__.py"
    assert "'Broken'" in message and str(script) in message
    assert "syntax error" in message and "line 3" in message
    assert resp.result.exception.stack_trace
    # The load failure is also logged.
    assert any(log.level == log.ERROR and "Broken" in log.message for log in session.host.logs())


def test_load_failure_import_error_in_module(session) -> None:
    resp = session.add_function("BadImport", """
        import no_such_module_xyz
        def main(req):
            return "x"
    """, expect_success=False)
    message = resp.result.exception.message
    assert resp.result.status == FAILURE
    assert "'BadImport'" in message and "ModuleNotFoundError" in message
    assert "no_such_module_xyz" in message


def test_load_failure_missing_entry_point(session) -> None:
    resp = session.add_function("NoMain", """
        def handler(req):
            return "x"
    """, expect_success=False)
    message = resp.result.exception.message
    assert resp.result.status == FAILURE
    assert "'NoMain'" in message and "'main'" in message and "not found" in message
    assert str(session.app.root / "NoMain" / "__init__.py") in message


def test_load_failure_entry_point_not_callable(session) -> None:
    resp = session.add_function("NotCallable", """
        main = 42
    """, expect_success=False)
    message = resp.result.exception.message
    assert resp.result.status == FAILURE
    assert "'NotCallable'" in message and "not callable" in message


def test_custom_entry_point_and_script_file(session) -> None:
    session.add_function("Custom", """
        def handle(req):
            return "custom"
    """, script="handler.py", entry_point="handle")
    out = session.call("Custom", req=http())
    assert out.result.status == SUCCESS and out.return_value.string == "custom"


def test_unknown_function_id_fails(session) -> None:
    out = session.call("never-loaded", req=http())
    assert out.result.status == FAILURE
    assert "never-loaded" in out.result.exception.message


def test_terminate_waits_for_inflight_and_exits_zero(session) -> None:
    session.add_function("Slow", """
        import asyncio
        async def main(req):
            await asyncio.sleep(0.3)
            return "done"
    """)
    inv = session.host.invoke("Slow", {"req": http()})
    time.sleep(0.05)  # let the invocation start before terminating
    session.host.terminate(grace_period_ms=3000)
    out = session.host.response(inv)
    assert out.result.status == SUCCESS and out.return_value.string == "done"
    session.host.close_stream()
    assert session.worker.wait(timeout=5) == 0, session.worker.stderr()


def test_terminate_rejects_new_invocations(session) -> None:
    session.add_function("Slow2", """
        import time
        def main(req):
            time.sleep(0.3)
            return "done"
    """)
    first = session.host.invoke("Slow2", {"req": http()})
    time.sleep(0.05)
    session.host.terminate(grace_period_ms=3000)
    late = session.host.invoke("Slow2", {"req": http()})
    assert session.host.response(late).result.status == FAILURE
    assert session.host.response(first).result.status == SUCCESS
    assert session.worker.wait(timeout=5) == 0


def test_terminate_grace_period_elapses(session) -> None:
    session.add_function("Forever", """
        import asyncio
        async def main(req):
            await asyncio.sleep(30)
    """)
    session.host.invoke("Forever", {"req": http()})
    time.sleep(0.05)
    session.host.terminate(grace_period_ms=200)
    session.host.close_stream()
    assert session.worker.wait(timeout=5) == 0


def test_host_closes_stream_worker_exits_nonzero(session) -> None:
    session.host.close_stream()
    code = session.worker.wait(timeout=10)
    assert code != 0


def test_host_server_dies_worker_exits_nonzero(session) -> None:
    session.add_function("Busy", """
        import time
        def main(req):
            time.sleep(10)
    """)
    session.host.invoke("Busy", {"req": http()})  # a sync function still running
    session.host.close()  # the host's server disappears
    code = session.worker.wait(timeout=10)
    assert code != 0


def test_worker_exits_when_parent_dies(host: FakeHost, tmp_path: Path) -> None:
    # An intermediate process starts the worker and dies without closing anything:
    # the worker (reparented) notices and exits on its own.
    app = tmp_path / "app"
    app.mkdir()
    pid_file = tmp_path / "worker.pid"
    launcher = textwrap.dedent(f"""
        import subprocess, sys, time
        p = subprocess.Popen([{PYTHON!r}, {str(WORKER_PY)!r}, "--host", "127.0.0.1",
                              "--port", "{host.port}", "--worker-id", "orphan"],
                             cwd={str(app)!r})
        open({str(pid_file)!r}, "w").write(str(p.pid))
        time.sleep(30)
    """)
    parent = subprocess.Popen([PYTHON, "-c", launcher])
    worker_pid = 0
    try:
        connect(host, None)  # the worker is up and connected
        worker_pid = int(pid_file.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and _alive(worker_pid):
            time.sleep(0.05)
        assert not _alive(worker_pid), "worker outlived its parent"
    finally:
        parent.kill()
        if worker_pid and _alive(worker_pid):
            os.kill(worker_pid, 9)


def _alive(pid: int) -> bool:
    # The orphan is reaped by init/the subreaper; a zombie counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_terminate_exits_zero_even_if_host_keeps_stream_open(session) -> None:
    session.host.close_on_half_close = False
    session.host.terminate(grace_period_ms=100)
    assert session.worker.wait(timeout=5) == 0
    assert session.host.stream_ended.wait(1)  # the worker half-closed its side


def test_worker_gives_up_when_no_host_listens(tmp_path: Path) -> None:
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, FAAST_WORKER_CONNECT_TIMEOUT="0.5")
    proc = subprocess.Popen([PYTHON, str(WORKER_PY), "--host", "127.0.0.1", "--port", str(port),
                             "--worker-id", "lonely"], cwd=tmp_path, env=env,
                            stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=5)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert b"cannot connect" in err


def test_fresh_clone_generates_protobuf_module(host: FakeHost, tmp_path: Path) -> None:
    # Copy the sources without worker_pb2.py: the worker must generate it at startup.
    import shutil
    src = WORKER_PY.parent
    repo = tmp_path / "repo"
    shutil.copytree(src.parent.parent / "protos", repo / "protos")
    shutil.copytree(src, repo / "workers" / "python", ignore=shutil.ignore_patterns(
        "worker_pb2.py", "__pycache__", "tests", "bench"))
    generated = repo / "workers" / "python" / "faast_worker" / "worker_pb2.py"
    assert not generated.exists()
    app = tmp_path / "app"
    app.mkdir()
    proc = subprocess.Popen([PYTHON, str(repo / "workers" / "python" / "worker.py"),
                             "--host", "127.0.0.1", "--port", str(host.port),
                             "--worker-id", "fresh"], cwd=app)
    try:
        assert connect(host, None).worker_id == "fresh"
        assert host.init(app).result.status == SUCCESS
        assert generated.exists()
    finally:
        proc.kill()
        proc.wait()


def test_gen_proto_detects_stale_output(tmp_path: Path) -> None:
    import gen_proto
    target = gen_proto.generate(tmp_path)
    assert target == tmp_path / "worker_pb2.py" and "StreamingMessage" in target.read_text()
    assert not gen_proto.is_stale(target)
    old = gen_proto.PROTO.stat().st_mtime - 10
    os.utime(target, (old, old))
    assert gen_proto.is_stale(target)
    assert gen_proto.is_stale(tmp_path / "missing_pb2.py")
