"""The JupyterLess kernel through jupyter_client's KernelManager, against the executor served by ./faast notebook's
platform (conftest_kernel.faast_notebook): execute, errors, interrupt, restart, display data, stdin, a lost runtime, keys.
Every wait is for a condition with a generous deadline (a busy 2-core machine)."""

import base64
import http.server
import os
import socket
import stat
import threading
import time

import pytest
from jupyter_client.manager import KernelManager

pytest_plugins = ["conftest_kernel"]
pytest.register_assert_rewrite("conftest_kernel")

from conftest_kernel import processes_mentioning  # noqa: E402

CELL_DEADLINE = 300  # seconds a cell may take here (cold workers, a busy machine)


class Kernel:
    def __init__(self, env):
        self.km = KernelManager(kernel_name="jupyterless")
        # The kernelspec is looked up in JUPYTER_PATH when the manager starts the kernel.
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]
        try:
            self.km.start_kernel(env=env)
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old
        self.connect()

    def connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    def send(self, code):
        return self.kc.execute(code, stop_on_error=False)

    def collect(self, msg_id, deadline=CELL_DEADLINE):
        """The iopub messages of one request until the kernel is idle again, and its execute_reply."""
        messages = []
        end = time.monotonic() + deadline
        while True:
            remaining = end - time.monotonic()
            assert remaining > 0, f"no idle status within {deadline} s; got {[m['msg_type'] for m in messages]}"
            try:
                msg = self.kc.get_iopub_msg(timeout=min(remaining, 5))
            except Exception:  # queue.Empty
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            messages.append(msg)
        while True:
            remaining = end - time.monotonic()
            assert remaining > 0, "no execute_reply"
            reply = self.kc.get_shell_msg(timeout=max(remaining, 1))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], messages

    def run(self, code, deadline=CELL_DEADLINE):
        return self.collect(self.send(code), deadline)

    def stop(self):
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=False)


def of_type(messages, kind):
    return [m["content"] for m in messages if m["msg_type"] == kind]


def stdout(messages):
    return "".join(c["text"] for c in of_type(messages, "stream") if c["name"] == "stdout")


@pytest.fixture
def kernel(faast_notebook):
    k = Kernel(faast_notebook.kernel_env())
    try:
        yield k
    finally:
        k.stop()


def test_execute_prints_and_returns_the_last_value_and_keeps_state(kernel):
    reply, messages = kernel.run("x = 41\nprint('hello from the executor')\nx + 1")
    assert reply["status"] == "ok", reply
    assert stdout(messages) == "hello from the executor\n"
    results = of_type(messages, "execute_result")
    assert len(results) == 1 and results[0]["data"]["text/plain"] == "42"
    assert results[0]["execution_count"] == reply["execution_count"] == 1
    # The next cell sees the state the first one left (another invocation, the state through storage).
    reply, messages = kernel.run("x * 2")
    assert reply["status"] == "ok", reply
    assert of_type(messages, "execute_result")[0]["data"]["text/plain"] == "82"
    assert reply["execution_count"] == 2
    # A cell whose last statement is not an expression has no result.
    reply, messages = kernel.run("y = x")
    assert reply["status"] == "ok" and not of_type(messages, "execute_result")


def test_an_error_shows_its_traceback_and_the_session_goes_on(kernel):
    assert kernel.run("kept = {'a': [1, 2, 3]}")[0]["status"] == "ok"
    reply, messages = kernel.run("def divide(a):\n    return a / 0\n\ndivide(7)")
    assert reply["status"] == "error"
    assert reply["ename"] == "ZeroDivisionError"
    errors = of_type(messages, "error")
    assert len(errors) == 1 and errors[0]["ename"] == "ZeroDivisionError"
    text = "\n".join(errors[0]["traceback"])
    assert "divide" in text and "ZeroDivisionError" in text, text
    reply, messages = kernel.run("kept['a'][-1]")
    assert reply["status"] == "ok" and of_type(messages, "execute_result")[0]["data"]["text/plain"] == "3"


def test_input_is_refused_clearly(kernel):
    started = time.monotonic()
    reply, messages = kernel.run("name = input('your name? ')")
    assert reply["status"] == "error"
    assert "stdin is not available in JupyterLess" in reply["evalue"], reply
    assert of_type(messages, "error")
    assert time.monotonic() - started < CELL_DEADLINE


def test_display_data_png_html_and_display(kernel):
    reply, messages = kernel.run(
        "import matplotlib.pyplot as plt\n"
        "%matplotlib inline\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([0, 1, 2, 3], [1, 4, 2, 5])\n"
        "ax.set_title('JupyterLess')")
    assert reply["status"] == "ok", reply
    pngs = [c["data"]["image/png"] for c in of_type(messages, "display_data") if "image/png" in c["data"]]
    assert len(pngs) == 1, [c["data"].keys() for c in of_type(messages, "display_data")]
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")

    reply, messages = kernel.run(
        "import pandas as pd\n"
        "df = pd.DataFrame({'city': ['Lisbon', 'Porto'], 'people': [545000, 232000]})\n"
        "df")
    assert reply["status"] == "ok", reply
    result = of_type(messages, "execute_result")[0]["data"]
    assert "<table" in result["text/html"] and "Lisbon" in result["text/html"]
    assert "Porto" in result["text/plain"]

    reply, messages = kernel.run("from IPython.display import display\ndisplay(df.head(1))\nprint('after')")
    assert reply["status"] == "ok", reply
    displays = of_type(messages, "display_data")
    assert len(displays) == 1 and "Lisbon" in displays[0]["data"]["text/html"]
    assert "Porto" not in displays[0]["data"]["text/html"]
    assert stdout(messages) == "after\n"


def test_interrupt_abandons_the_cell_at_once_and_the_kernel_goes_on(kernel):
    msg_id = kernel.send("import time\ntime.sleep(60)\n'not interrupted'")
    # The kernel is handling the cell once it has published its input; an interrupt from then on ends the cell, whether
    # its request is already waiting for the executor or about to be sent.
    end = time.monotonic() + 120
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=max(end - time.monotonic(), 1))
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
            break
    interrupted = time.monotonic()
    kernel.km.interrupt_kernel()
    reply, messages = kernel.collect(msg_id, deadline=120)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert of_type(messages, "error")[0]["ename"] == "KeyboardInterrupt"
    assert not of_type(messages, "execute_result")
    # It did not wait for the cell (60 s): the reply came well before the invocation could have ended.
    assert time.monotonic() - interrupted < 50
    # The kernel takes the next cell. The abandoned invocation still runs in the executor and commits when it ends
    # (60 s); a cell whose invocation read the state before that commit and writes after it loses the conditional
    # write: a clear conflict, and run again it succeeds (e.g. with one worker thread the next cell's bindings are read
    # while it waits behind the sleeping one).
    reply, messages = kernel.run("1 + 1")
    if reply["status"] == "error":
        assert reply["ename"] == "JupyterLessConflict", reply
        reply, messages = kernel.run("1 + 1")
    assert reply["status"] == "ok", reply
    assert of_type(messages, "execute_result")[0]["data"]["text/plain"] == "2"


def test_cells_that_change_nothing_still_count_up_in_the_notebook(kernel):
    """Print-only cells write no state (the session's count stays), but the notebook's In [n] still moves on."""
    counts = [kernel.run(code)[0]["execution_count"] for code in ("v = 1", "print(v)", "print(v)", "w = v")]
    assert counts == sorted(set(counts)), counts


def test_restart_starts_an_empty_session(kernel):
    assert kernel.run("secret_value = 1234")[0]["status"] == "ok"
    assert of_type(kernel.run("secret_value")[1], "execute_result")[0]["data"]["text/plain"] == "1234"
    kernel.kc.stop_channels()
    kernel.km.restart_kernel(now=False)
    kernel.connect()
    reply, messages = kernel.run("secret_value")
    assert reply["status"] == "error" and reply["ename"] == "NameError", reply
    reply, messages = kernel.run("1")
    assert reply["status"] == "ok" and reply["execution_count"] <= 2  # a new session counts from 1 again


class _Server:
    """A loopback HTTP server on a free port that answers every POST with handler(self)."""

    def __init__(self, handler):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                handler(self)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _scripted_executor(requests, replies, record):
    """A handler for _Server answering each request with the next (status, JSON body) of `replies` and appending
    record(handler, the request's JSON) to `requests`."""
    import json

    def executor(h):
        requests.append(record(h, json.loads(h.rfile.read(int(h.headers["content-length"])))))
        status, body = replies.pop(0)
        raw = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    return executor


def _lost_runtime_kernel(bare_kernel_env, url, timeout=None):
    env = bare_kernel_env(JUPYTERLESS_URL=url, JUPYTERLESS_KEY="not-a-key")
    if timeout:
        env["JUPYTERLESS_TIMEOUT"] = str(timeout)
    return Kernel(env)


def test_a_lost_runtime_is_a_clear_error_not_a_hang(bare_kernel_env):
    # Nothing listens on the port any more (connection refused).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()
    k = _lost_runtime_kernel(bare_kernel_env, url)
    try:
        reply, messages = k.run("1 + 1", deadline=120)
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessRuntimeError", reply
        assert f"{url}/api/execute" in reply["evalue"] and "cannot reach" in reply["evalue"]
        assert of_type(messages, "error")
    finally:
        k.stop()

    # A runtime that takes the connection and never answers: the kernel gives up after its timeout.
    hang = threading.Event()
    server = _Server(lambda h: hang.wait(120))
    k = _lost_runtime_kernel(bare_kernel_env, server.url, timeout=3)
    try:
        reply, _ = k.run("1 + 1", deadline=120)
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessRuntimeError", reply
        assert server.url in reply["evalue"] and "did not answer within 3 s" in reply["evalue"], reply["evalue"]
    finally:
        hang.set()
        k.stop()
        server.close()

    # A runtime that answers 5xx.
    def unavailable(h):
        h.rfile.read(int(h.headers["content-length"]))
        body = b'{"error": "the host is stopping"}'
        h.send_response(503)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server = _Server(unavailable)
    k = _lost_runtime_kernel(bare_kernel_env, server.url)
    try:
        reply, _ = k.run("1 + 1", deadline=120)
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessRuntimeError", reply
        assert server.url in reply["evalue"] and "HTTP 503" in reply["evalue"] and "stopping" in reply["evalue"]
    finally:
        k.stop()
        server.close()


def test_the_key_is_needed_and_never_in_argv_or_a_readable_file(faast_notebook, tmp_path):
    # The executor refuses a cell without the function key, or with a wrong one.
    body = {"session": "0" * 32, "code": "1"}
    assert faast_notebook.post("execute", body)[0] == 401
    assert faast_notebook.post("execute", body, key="wrong")[0] == 401
    # A kernel with a wrong key says so.
    k = Kernel(faast_notebook.kernel_env(JUPYTERLESS_URL=faast_notebook.executor_url, JUPYTERLESS_KEY="wrong"))
    try:
        reply, _ = k.run("1")
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessAuthError", reply
        # Its command line holds no key (the kernelspec's argv: python3, the kernel's file, the connection file).
        for pid, cmdline in processes_mentioning("jupyterless_kernel.py"):
            assert faast_notebook.key not in cmdline
    finally:
        k.stop()
    # The launcher's config file is its owner's only, and the notebook server's command line holds neither the key
    # nor its token.
    assert stat.S_IMODE(os.stat(faast_notebook.config_file).st_mode) == 0o600
    for pid, cmdline in processes_mentioning(str(faast_notebook.notebook_dir)):
        assert faast_notebook.key not in cmdline and faast_notebook.token not in cmdline
    # The kernel refuses a config file others may read.
    loose = tmp_path / "config.json"
    loose.write_text(faast_notebook.config_file.read_text())
    loose.chmod(0o644)
    k = Kernel(faast_notebook.kernel_env(JUPYTERLESS_CONFIG=str(loose)))
    try:
        reply, _ = k.run("1")
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessConfigError", reply
        assert str(loose) in reply["evalue"] and "chmod 600" in reply["evalue"]
    finally:
        k.stop()


def test_the_request_and_the_stale_and_conflict_replies(bare_kernel_env):
    """The kernel's side of the contract, against a scripted executor: the request's shape, a `stale` reply answered
    once with its `large` map, a 409 shown as a conflict."""
    import json
    import re

    requests = []
    replies = []

    executor = _scripted_executor(requests, replies, lambda h, body: (h.headers.get("x-functions-key"), body))

    large = {f"in{i}": None for i in range(32)}
    large["in0"] = "0123456789abcdef-3"
    ok = {"status": "ok", "execution_count": 1, "stdout": "", "stderr": "", "result": {"text/plain": "'done'"},
          "displays": [], "large": large, "warnings": ["variable 'sock' cannot be pickled; it was not kept"]}
    replies += [(200, {"status": "stale", "large": large}), (200, ok),
                (409, {"error": "conflict", "binding": "stateOut", "blob": "jupyterless/sessions/x/state.pkl",
                       "message": "the blob changed"})]
    server = _Server(executor)
    k = _lost_runtime_kernel(bare_kernel_env, server.url)
    try:
        reply, messages = k.run("'done'", deadline=120)
        assert reply["status"] == "ok", reply
        assert of_type(messages, "execute_result")[0]["data"]["text/plain"] == "'done'"
        warnings = "".join(c["text"] for c in of_type(messages, "stream") if c["name"] == "stderr")
        assert "'sock' cannot be pickled" in warnings
        assert len(requests) == 2
        (key, first), (_, second) = requests
        assert key == "not-a-key"
        assert re.fullmatch(r"[0-9a-f]{32}", first["session"]) and second["session"] == first["session"]
        assert first["code"] == "'done'" and first["silent"] is False and first["store_history"] is True
        assert all(first[f"in{i}"] is None for i in range(32))
        outs = [first[f"out{i}"] for i in range(32)]
        assert all(re.fullmatch(r"[0-9a-f]{16}-%d" % i, o) for i, o in enumerate(outs)), outs
        assert second["in0"] == "0123456789abcdef-3"  # resent once with the stale reply's map

        reply, messages = k.run("x = 1", deadline=120)
        assert reply["status"] == "error" and reply["ename"] == "JupyterLessConflict", reply
        assert "the blob changed" in reply["evalue"]
        assert len(requests) == 3  # nothing resent silently
        assert requests[2][1]["in0"] == "0123456789abcdef-3"  # the map the last reply gave
        assert requests[2][1]["out0"] != first["out0"]  # fresh names per cell
    finally:
        k.stop()
        server.close()


def test_a_runtime_without_null_blob_paths_gets_names_of_absent_blobs(bare_kernel_env):
    """Unused slots are null (the contract, Part A2); a runtime that refuses a null path (400 before the function
    runs) gets the request again with absent-<i> names for them, and every later cell too."""
    import json

    requests = []
    refused = {"error": 'function Execute: binding "in0" path "jupyterless/sessions/{session}/large/{in0}" needs a '
                        "value for {in0}: the JSON body's \"in0\" is null"}
    ok = {"status": "ok", "execution_count": 1, "stdout": "ran\n", "stderr": "", "result": None, "displays": [],
          "large": {"in0": "0123456789abcdef-0"}, "warnings": []}
    replies = [(400, refused), (200, ok), (200, dict(ok, execution_count=2))]

    server = _Server(_scripted_executor(requests, replies, lambda h, body: body))
    k = _lost_runtime_kernel(bare_kernel_env, server.url)
    try:
        reply, messages = k.run("print('ran')", deadline=120)
        assert reply["status"] == "ok", reply
        assert stdout(messages) == "ran\n"
        assert requests[0]["in5"] is None and requests[1]["in5"] == "absent-5"
        assert requests[1]["out0"] == requests[0]["out0"]  # the same request again (nothing ran)
        reply, _ = k.run("print('ran')", deadline=120)
        assert reply["status"] == "ok" and len(requests) == 3
        assert requests[2]["in0"] == "0123456789abcdef-0" and requests[2]["in1"] == "absent-1"
    finally:
        k.stop()
        server.close()


def test_the_kernel_binds_only_the_large_blobs_a_cell_names_by_the_executors_map(bare_kernel_env):
    """The reply's needs/dynamic decide the next request's in-slots: a cell naming nothing large binds nothing, one
    naming a variable binds its blobs, a dynamic word binds the whole map."""
    import json

    requests = []
    large = {f"in{i}": None for i in range(32)}
    large.update(in0="aaaaaaaaaaaaaaaa-0", in1="bbbbbbbbbbbbbbbb-1")
    ok = {"status": "ok", "execution_count": 1, "stdout": "", "stderr": "", "result": None, "displays": [],
          "large": large, "warnings": [], "needs": {"col": ["aaaaaaaaaaaaaaaa-0"], "pair": ["bbbbbbbbbbbbbbbb-1"]},
          "dynamic": ["globals", "eval"]}
    replies = [(200, dict(ok, execution_count=n)) for n in range(1, 5)]

    server = _Server(_scripted_executor(requests, replies, lambda h, body: body))
    k = _lost_runtime_kernel(bare_kernel_env, server.url)
    try:
        for code in ("x = 1", "print(x)", "col.sum()", "globals()['pair']"):
            assert k.run(code, deadline=120)[0]["status"] == "ok"
        bound = [{v for i in range(32) if (v := r[f"in{i}"])} for r in requests]
        assert bound == [set(), set(), {"aaaaaaaaaaaaaaaa-0"}, {"aaaaaaaaaaaaaaaa-0", "bbbbbbbbbbbbbbbb-1"}], bound
        assert requests[2]["in0"] == "aaaaaaaaaaaaaaaa-0"  # in its slot of the map
    finally:
        k.stop()
        server.close()
