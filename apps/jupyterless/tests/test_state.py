"""Unit tests of the executor's state module and cell runner, in this process (no platform)."""
import base64
import pickle
import socket

import numpy as np
import pandas as pd
import pytest

from jupyterless import cell, state as st

SESSION = "0123456789abcdef0123456789abcdef"


class Session:
    """Plays the runtime's part: keeps the blobs and binds them as the function.json says."""

    def __init__(self):
        self.state = None
        self.blobs = {}
        self.large = {}
        self.n = 0
        self.writes = []

    def run(self, code, **extra):
        self.n += 1
        body = {"session": SESSION, "code": code}
        for i in range(32):
            body[f"in{i}"] = self.large.get(f"in{i}")
            body[f"out{i}"] = f"{self.n:016x}-{i}"
        body.update(extra)
        inputs = {f"in{i}": (memoryview(self.blobs[body[f"in{i}"]]) if body[f"in{i}"] in self.blobs else None)
                  for i in range(32)}
        reply, new_state, outputs = cell.execute(cell.parse_request(body), self.state, inputs)
        self.writes.append(sorted(outputs))
        for slot, data in outputs.items():
            self.blobs[body[slot]] = bytes(data)
        if new_state is not None:
            self.state = new_state
            self.large = reply["large"]
        return reply


def test_ints_and_nested_dicts_round_trip():
    s = Session()
    assert s.run("a = 1\nd = {'x': [1, 2, {'y': (3, 'z')}]}")["status"] == "ok"
    r = s.run("a + 1, d['x'][2]['y']")
    assert r["status"] == "ok" and r["result"]["text/plain"] == "(2, (3, 'z'))"
    assert r["execution_count"] == 2


def test_numpy_and_pandas_large_round_trip_and_written_only_when_changed():
    s = Session()
    r = s.run("import numpy as np, pandas as pd\narr = np.arange(300_000, dtype='int64')\n"
              "df = pd.DataFrame({'a': np.arange(200_000), 'b': np.ones(200_000)})\nsmall = np.arange(3)")
    assert r["status"] == "ok", r
    assert len(r["large"]) == 2 and s.writes[-1] == ["out0", "out1"]
    r = s.run("int(arr.sum()), float(df.b.sum()), small.tolist()")
    assert r["result"]["text/plain"] == "(44999850000, 200000.0, [0, 1, 2])"
    assert s.writes[-1] == []  # nothing changed: no large blob written
    r = s.run("df.loc[0, 'b'] = 5.0\narr[0] = 7")  # in place: the loaded copies are writable
    assert r["status"] == "ok", r
    assert len(s.writes[-1]) == 2
    r = s.run("float(df.b.sum()), int(arr[0])")
    assert r["result"]["text/plain"] == "(200004.0, 7)"


def test_list_of_dataframe_chunks():
    s = Session()
    r = s.run("import numpy as np, pandas as pd\n"
              "chunks = [pd.DataFrame({'v': np.full(140_000, i, dtype='float64')}) for i in range(10)]")
    assert r["status"] == "ok", r
    assert len(r["large"]) == 10
    r = s.run("sum(float(c.v.sum()) for c in chunks)")
    assert r["result"]["text/plain"] == str(float(sum(i * 140_000 for i in range(10))))
    assert s.writes[-1] == []


def test_unpicklable_variable_named_and_rest_kept():
    s = Session()
    r = s.run("import socket\nsock = socket.socket()\nkeep = 42")
    assert r["status"] == "ok"
    assert any("'sock'" in w for w in r["warnings"]), r["warnings"]
    r = s.run("keep, 'sock' in dir()")
    assert r["result"]["text/plain"] == "(42, False)"


def test_functions_and_classes_defined_in_cells():
    s = Session()
    r = s.run("def sq(x):\n    return x * x\n\n"
              "class P:\n    def __init__(self, v):\n        self.v = v\n\np = P(3)\nf = sq")
    assert r["status"] == "ok" and not r["warnings"], r
    r = s.run("sq(p.v), f(2), type(p).__name__")
    assert r["result"]["text/plain"] == "(9, 4, 'P')", r


def test_error_keeps_state_and_traceback():
    s = Session()
    s.run("x = 5")
    r = s.run("y = 1\n1 / 0")
    assert r["status"] == "error" and r["ename"] == "ZeroDivisionError"
    assert any("1 / 0" in line for line in r["traceback"]), r["traceback"]
    assert s.run("x")["result"]["text/plain"] == "5"


def test_syntax_error_and_traceback_into_a_function_of_an_earlier_cell():
    s = Session()
    r = s.run("def f():\n    return 1 / 0")
    assert r["status"] == "ok"
    r = s.run("f()")
    assert r["ename"] == "ZeroDivisionError" and any("return 1 / 0" in t for t in r["traceback"]), r
    r = s.run("x = (")
    assert r["status"] == "error" and r["ename"] == "SyntaxError"


def test_display_data_png_and_html():
    s = Session()
    r = s.run("import matplotlib.pyplot as plt\nimport pandas as pd\nplt.plot([1, 2, 3])\n"
              "from IPython.display import display\ndisplay(pd.DataFrame({'a': [1]}))\npd.DataFrame({'b': [2]})")
    assert r["status"] == "ok", r
    kinds = [sorted(d["data"]) for d in r["displays"]]
    assert ["text/html", "text/plain"] in kinds
    pngs = [d["data"]["image/png"] for d in r["displays"] if "image/png" in d["data"]]
    assert len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(b"\x89PNG")
    assert "<table" in r["result"]["text/html"]


def test_stdout_stderr_threads_time_and_magics():
    s = Session()
    r = s.run("import sys, threading\nprint('out')\nprint('err', file=sys.stderr)\n"
              "t = threading.Thread(target=lambda: print('thread'))\nt.start(); t.join()\ndel t")
    assert r["stdout"] == "out\nthread\n" and r["stderr"] == "err\n"
    r = s.run("%time z = sum(range(10))\nz")
    assert "Wall time" in r["stdout"] and r["result"]["text/plain"] == "45"
    r = s.run("%%time\nw = 2\nw * 3")
    assert "CPU times" in r["stdout"] and r["result"]["text/plain"] == "6"
    r = s.run("%load_ext foo")
    assert r["status"] == "error" and "%load_ext" in r["evalue"]
    r = s.run("!ls")
    assert r["status"] == "error" and "shell" in r["evalue"]
    assert s.run("%matplotlib inline\n1")["result"]["text/plain"] == "1"
    r = s.run("input('x')")
    assert r["status"] == "error" and "stdin is not available in JupyterLess" in r["evalue"]


def test_last_expression_history_and_semicolon():
    s = Session()
    assert s.run("1 + 1")["result"]["text/plain"] == "2"
    assert s.run("3;")["result"] is None
    r = s.run("_, Out[1]")
    assert r["result"]["text/plain"] == "(2, 2)"


def test_working_directory_files_kept():
    s = Session()
    assert s.run("open('data.txt', 'w').write('hello')\nimport os\nos.makedirs('sub')\n"
                 "open('sub/b.bin', 'wb').write(b'x')")["status"] == "ok"
    r = s.run("open('data.txt').read(), open('sub/b.bin','rb').read()")
    assert r["result"]["text/plain"] == "('hello', b'x')"


def test_files_over_limit_error_names_file(monkeypatch):
    monkeypatch.setattr(st, "FILES_LIMIT", 1000)
    s = Session()
    r = s.run("open('big.bin', 'wb').write(b'0' * 2000)\nv = 1")
    assert r["status"] == "error" and "big.bin" in r["evalue"]
    assert s.run("v")["result"]["text/plain"] == "1"


def test_stale_when_large_not_bound():
    s = Session()
    s.run("import numpy as np\na = np.zeros(200_000)")
    saved = dict(s.large)
    s.large = {}
    r = s.run("a.sum()")
    assert r["status"] == "stale" and r["large"] == saved
    s.large = r["large"]
    assert s.run("float(a.sum())")["result"]["text/plain"] == "0.0"


def test_bad_requests():
    for body in ({"session": "x", "code": ""}, {"session": SESSION.upper()}, {"session": SESSION, "in0": "../a"},
                 {"session": SESSION, "code": 3}, []):
        with pytest.raises(cell.BadRequest):
            cell.parse_request(body)


def test_large_blob_format_copy_is_writable_and_independent():
    a = np.arange(10, dtype="int32")
    blob = bytes(st.dump_large(a))
    b = st.load_large(memoryview(blob))
    b[0] = 99
    assert a[0] == 0 and b.flags.writeable
    assert st.same_large(a, blob) and not st.same_large(b, blob)
    df = pd.DataFrame({"x": [1.0, 2.0]})
    assert st.load_large(st.dump_large(df)).equals(df)
    with pytest.raises(st.StateError):
        st.load_large(b"nope" * 10)


def test_inputs_as_input_streams_over_read_only_memory():
    """The function gets func.InputStream (shared memory: a read-only memoryview, valid during the
    invocation); the loaded objects must be writable copies that outlive it."""
    import azure.functions as func
    s = Session()
    s.run("import numpy as np\na = np.arange(200_000)")
    body = {"session": SESSION, "code": "a[0] = 5\nint(a[0])", "out0": "fresh-0"}
    body.update(s.large)
    backing = bytearray(s.blobs[s.large["in0"]])
    stream = func.InputStream(data=memoryview(backing).toreadonly())
    reply, new_state, outputs = cell.execute(cell.parse_request(body), func.InputStream(data=s.state),
                                             {"in0": stream})
    assert reply["status"] == "ok" and reply["result"]["text/plain"] == "5", reply
    assert bytes(backing) == s.blobs[s.large["in0"]]  # the input was not modified
    assert list(outputs) == ["out0"] and reply["large"] == {"in0": "fresh-0"}


def test_state_magic_and_empty():
    assert st.load_state(None)["execution_count"] == 0
    assert st.load_state(b"")["manifest"] == {}
    with pytest.raises(st.StateError):
        st.load_state(pickle.dumps({}))
