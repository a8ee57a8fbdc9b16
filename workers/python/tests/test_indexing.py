"""Python v2 programming model: decorators in function_app.py, worker indexing
(FunctionsMetadataRequest -> FunctionMetadataResponse), loading and invoking indexed functions
through the real worker process."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import FAILURE, IN, OUT, SUCCESS, App, FakeHost, blob, http, pb, start_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import azure.functions as func  # noqa: E402  (the project's own module, as the worker serves it)

APP = '''
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
bp = func.Blueprint()


@app.route(route="hello/{who}", methods=["GET"])
def hello(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("hello " + req.route_params["who"])


@app.function_name(name="Pipeline")
@app.blob_trigger(arg_name="src", path="in/{name}", connection="AzureWebJobsStorage")
@app.blob_output(arg_name="dst", path="out/{name}", connection="AzureWebJobsStorage")
def pipeline(src: func.InputStream, dst: func.Out[bytes]) -> None:
    dst.set(src.read().upper())


@bp.queue_trigger(arg_name="msg", queue_name="jobs", connection="AzureWebJobsStorage")
def work(msg: func.QueueMessage) -> None:
    pass


@app.schedule(schedule="*/5 * * * * *", arg_name="timer", run_on_startup=True, use_monitor=False)
@app.retry(strategy="fixed_delay", max_retry_count="3", delay_interval="00:00:10")
def tick(timer: func.TimerRequest) -> None:
    pass


app.register_functions(bp)
'''


def metadata(host: FakeHost, app_dir: Path) -> pb.FunctionMetadataResponse:
    msg = pb.StreamingMessage(request_id=host.next_id("meta"))
    msg.functions_metadata_request.function_app_directory = str(app_dir)
    host.send(msg)
    return host.recv(lambda m: m.request_id == msg.request_id).function_metadata_response


def by_name(resp: pb.FunctionMetadataResponse) -> Dict[str, pb.RpcFunctionMetadata]:
    return {m.name: m for m in resp.function_metadata_results}


def raw(meta: pb.RpcFunctionMetadata) -> List[dict]:
    return [json.loads(b) for b in meta.raw_bindings]


# ---- decorators (the module alone) -------------------------------------------------------

def test_each_decorator_yields_the_function_json_binding_azure_would() -> None:
    app = func.FunctionApp()

    @app.route(route="items/{id}", methods=[func.HttpMethod.GET, "post"], auth_level=func.AuthLevel.ADMIN)
    def items(req):
        pass

    @app.blob_trigger(arg_name="b", path="c/{name}", connection="Conn", data_type=func.DataType.BINARY)
    @app.blob_input(arg_name="i", path="c/other", connection="Conn")
    @app.queue_output(arg_name="q", queue_name="outq", connection="Conn")
    def blobs(b, i, q):
        pass

    @app.generic_trigger(arg_name="t", type="someTrigger", x_setting="v")
    def generic(t):
        pass

    fns = {f.get_function_name(): f for f in app.get_functions()}
    assert fns["items"].get_bindings_dict()["bindings"] == [
        {"type": "httpTrigger", "direction": "in", "name": "req", "route": "items/{id}",
         "methods": ["GET", "POST"], "authLevel": "admin"},
        {"type": "http", "direction": "out", "name": "$return"},
    ]
    assert fns["blobs"].get_bindings_dict()["bindings"] == [
        {"type": "blobTrigger", "direction": "in", "name": "b", "path": "c/{name}", "connection": "Conn",
         "dataType": "binary"},
        {"type": "blob", "direction": "in", "name": "i", "path": "c/other", "connection": "Conn"},
        {"type": "queue", "direction": "out", "name": "q", "queueName": "outq", "connection": "Conn"},
    ]
    assert fns["generic"].get_bindings_dict()["bindings"] == [
        {"type": "someTrigger", "direction": "in", "name": "t", "xSetting": "v"}]


def test_a_route_without_auth_level_takes_the_apps_and_its_route_defaults_to_the_function_name() -> None:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route()
    def ping(req):
        pass

    (fn,) = app.get_functions()
    trigger = fn.get_trigger()
    assert trigger["route"] == "ping" and trigger["authLevel"] == "anonymous"


@pytest.mark.parametrize("source, expected", [
    ("""
@app.blob_trigger(arg_name="b", connection="C")
def f(b): pass
""", "function 'f': @app.blob_trigger: missing required argument 'path'"),
    ("""
@app.blob_input(arg_name="b", path="c/x", connection="C")
def f(b): pass
""", "function 'f': has no trigger"),
    ("""
@app.route()
@app.queue_trigger(arg_name="m", queue_name="q", connection="C")
def f(req, m): pass
""", "function 'f'"),
    ("""
@app.route()
@app.blob_input(arg_name="missing", path="c/x", connection="C")
def f(req): pass
""", "binding 'missing' is not a parameter of the function"),
    ("""
@app.function_name("same")
@app.route(route="a")
def f(req): pass
@app.function_name("SAME")
@app.route(route="b")
def g(req): pass
""", "function 'SAME': two functions have this name"),
])
def test_a_misused_decorator_is_an_error_naming_the_function_and_the_decorator(source: str, expected: str) -> None:
    scope = {"func": func, "app": func.FunctionApp()}
    with pytest.raises(func.FunctionRegistrationError) as err:
        exec(source, scope)
        scope["app"].get_functions()
    assert expected in str(err.value)


def test_asgi_and_wsgi_apps_say_they_are_not_supported() -> None:
    with pytest.raises(NotImplementedError, match="AsgiFunctionApp is not supported"):
        func.AsgiFunctionApp(app=object())


# ---- the worker: indexing, loading, invoking --------------------------------------------

def test_the_worker_indexes_function_app_py_into_one_metadata_entry_per_function(host: FakeHost, spawn, tmp_path: Path) -> None:
    app = App(tmp_path / "app")
    script = app.write("function_app.py", APP)
    start_session(host, spawn, app)

    resp = metadata(host, app.root)

    assert resp.result.status == SUCCESS, resp.result.result
    assert not resp.use_default_metadata_indexing
    fns = by_name(resp)
    assert sorted(fns) == ["Pipeline", "hello", "tick", "work"]
    for m in fns.values():
        assert m.script_file == str(script) and m.directory == str(app.root)
        assert m.language == "python" and m.function_id == m.name and m.entry_point == m.name
    assert raw(fns["hello"]) == [
        {"type": "httpTrigger", "direction": "in", "name": "req", "route": "hello/{who}", "methods": ["GET"],
         "authLevel": "anonymous"},
        {"type": "http", "direction": "out", "name": "$return"}]
    assert [b["type"] for b in raw(fns["Pipeline"])] == ["blobTrigger", "blob"]
    assert raw(fns["work"])[0] == {"type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "jobs",
                                   "connection": "AzureWebJobsStorage"}
    timer = raw(fns["tick"])[0]
    assert timer["type"] == "timerTrigger" and timer["schedule"] == "*/5 * * * * *"
    assert timer["runOnStartup"] is True and timer["useMonitor"] is False
    retry = fns["tick"].retry_options
    assert retry.max_retry_count == 3 and retry.retry_strategy == pb.RpcRetryOptions.fixed_delay
    assert retry.delay_interval.seconds == 10
    assert not fns["hello"].HasField("retry_options")


def test_a_blob_outputs_if_match_reaches_the_host_as_ifMatch_the_name_of_its_blob_input(host: FakeHost, spawn, tmp_path: Path) -> None:
    # FaaST's conditional blob outputs: the host validates and enforces "ifMatch"; the decorators pass it through as
    # any extra keyword (snake_case camelCased, as the azure-functions library does), and so does worker indexing.
    app = App(tmp_path / "app")
    app.write("function_app.py", """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="execute", methods=["POST"])
@app.blob_input(arg_name="state", path="jl/{session}/state.pkl", connection="AzureWebJobsStorage", data_type="binary")
@app.blob_output(arg_name="stateOut", path="jl/{session}/state.pkl", connection="AzureWebJobsStorage", if_match="state")
@app.blob_output(arg_name="other", path="jl/{session}/other", connection="AzureWebJobsStorage", ifMatch="state")
def execute(req: func.HttpRequest, state: bytes, stateOut: func.Out[bytes], other: func.Out[bytes]) -> func.HttpResponse:
    return func.HttpResponse("ok")
""")
    start_session(host, spawn, app)

    resp = metadata(host, app.root)

    assert resp.result.status == SUCCESS, resp.result.result
    bindings = {b["name"]: b for b in raw(by_name(resp)["execute"])}
    assert bindings["stateOut"] == {"type": "blob", "direction": "out", "name": "stateOut",
                                    "path": "jl/{session}/state.pkl", "connection": "AzureWebJobsStorage", "ifMatch": "state"}
    assert bindings["other"]["ifMatch"] == "state"
    assert "ifMatch" not in bindings["state"]


def test_an_app_without_function_app_py_gets_the_default_function_json_indexing(host: FakeHost, spawn, tmp_path: Path) -> None:
    app = App(tmp_path / "app")
    app.write("Hello/__init__.py", "def main(req):\n    return 'hi'\n")
    start_session(host, spawn, app)

    resp = metadata(host, app.root)

    assert resp.result.status == SUCCESS
    assert resp.use_default_metadata_indexing
    assert len(resp.function_metadata_results) == 0


@pytest.mark.parametrize("source, expected", [
    ("import azure.functions as func\napp = func.FunctionApp()\nraise RuntimeError('boom at import')\n",
     "(line 3): importing the app failed: RuntimeError: boom at import"),
    ("import azure.functions as func\napp = func.FunctionApp(\n", "syntax error"),
    ("import azure.functions as func\napp = func.FunctionApp()\n@app.blob_input(arg_name='x', path='c/x', connection='C')\n"
     "def f(x): pass\n", "function 'f': has no trigger"),
    ("x = 1\n", "defines no azure.functions.FunctionApp"),
])
def test_an_app_that_cannot_be_indexed_fails_naming_the_file_and_the_cause(host: FakeHost, spawn, tmp_path: Path,
                                                                            source: str, expected: str) -> None:
    app = App(tmp_path / "app")
    script = app.write("function_app.py", source)
    start_session(host, spawn, app)

    resp = metadata(host, app.root)

    assert resp.result.status == FAILURE
    assert str(script) in resp.result.result and expected in resp.result.result
    assert any("Indexing the app failed" in log.message for log in host.logs())


def test_python_script_file_name_names_another_script(host: FakeHost, spawn, tmp_path: Path) -> None:
    app = App(tmp_path / "app")
    app.write("main_app.py", "import azure.functions as func\napp = func.FunctionApp()\n"
                             "@app.route()\ndef only(req):\n    return 'x'\n")
    start_session(host, spawn, app, env={"PYTHON_SCRIPT_FILE_NAME": "main_app.py"})

    resp = metadata(host, app.root)

    assert [m.name for m in resp.function_metadata_results] == ["only"]
    assert resp.function_metadata_results[0].script_file == str(app.root / "main_app.py")


def test_indexed_functions_load_from_the_one_import_and_answer_invocations(host: FakeHost, spawn, tmp_path: Path) -> None:
    app = App(tmp_path / "app")
    script = app.write("function_app.py", APP + "\nIMPORTS = globals().get('IMPORTS', 0) + 1\n"
                                                "import builtins\nbuiltins.faast_imports = getattr(builtins, 'faast_imports', 0) + 1\n")
    app.write("probe.py", "")
    start_session(host, spawn, app)
    assert metadata(host, app.root).result.status == SUCCESS

    hello = host.load("hello", "hello", app.root, script, {"req": ("httpTrigger", IN), "$return": ("http", OUT)}, "hello")
    pipe = host.load("Pipeline", "Pipeline", app.root, script, {"src": ("blobTrigger", IN), "dst": ("blob", OUT)}, "Pipeline")
    assert hello.result.status == SUCCESS, hello.result.exception.message
    assert pipe.result.status == SUCCESS, pipe.result.exception.message

    out = host.response(host.invoke("hello", {"req": http(url="http://localhost/api/hello/ada", params={"who": "ada"})}))
    assert out.result.status == SUCCESS, out.result.exception.message
    assert out.return_value.http.body.bytes == b"hello ada" or out.return_value.http.body.string == "hello ada"

    res = host.response(host.invoke("Pipeline", {"src": blob(b"abc", name="in/x.txt")}))
    assert res.result.status == SUCCESS, res.result.exception.message
    (dst,) = [o for o in res.output_data if o.name == "dst"]
    assert dst.data.bytes == b"ABC"

    # The script ran once in this worker: loads took the registry, not a second import.
    check = app.write("Probe/__init__.py", "import builtins\ndef main(req):\n    return str(builtins.faast_imports)\n")
    assert host.load("Probe", "Probe", check.parent, check, {"req": ("httpTrigger", IN), "$return": ("http", OUT)}).result.status == SUCCESS
    count = host.response(host.invoke("Probe", {"req": http()}))
    assert count.return_value.string == "1"


def test_a_load_for_a_name_the_app_does_not_register_fails_naming_it(host: FakeHost, spawn, tmp_path: Path) -> None:
    app = App(tmp_path / "app")
    script = app.write("function_app.py", APP)
    start_session(host, spawn, app)

    resp = host.load("Ghost", "Ghost", app.root, script, {"req": ("httpTrigger", IN)}, "Ghost")

    assert resp.result.status == FAILURE
    assert "'Ghost'" in resp.result.exception.message and "registers no function of this name" in resp.result.exception.message
