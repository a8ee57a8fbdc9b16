"""The executor app (apps/jupyterless/executor) through the platform ./faast notebook starts (conftest_kernel's
faast_notebook): cells posted as the kernel posts them, the session's state carried between invocations through the
blob bindings and the cache. Every wait is for an answer with a generous deadline (a busy 2-core machine)."""

import base64
import json
import secrets

import pytest

pytest_plugins = ["conftest_kernel"]

SLOTS = 32


class Session:
    """What the kernel keeps: the session id, the large-object inputs the last reply named, fresh output names."""

    def __init__(self, jl):
        self.jl = jl
        self.id = secrets.token_hex(16)
        self.inputs = {f"in{i}": None for i in range(SLOTS)}
        self.written = []  # the fresh names the executor used (the large blobs written)

    def body(self, code):
        outs = {f"out{i}": f"{secrets.token_hex(8)}-{i}" for i in range(SLOTS)}
        return {"session": self.id, "code": code, **self.inputs, **outs}

    def post(self, code, key="default"):
        """Posts a cell, resending once when the reply is stale; (HTTP status, reply)."""
        for _ in range(2):
            body = self.body(code)
            status, reply = self.jl.post("execute", body, key=self.jl.key if key == "default" else key)
            if status != 200:
                return status, reply
            before = set(self.inputs.values())
            self.inputs = reply["large"]
            self.written += [n for n in self.inputs.values() if n and n not in before]
            if reply["status"] != "stale":
                return status, reply
        return status, reply

    def run(self, code):
        status, reply = self.post(code)
        assert status == 200, (status, reply)
        assert reply["status"] == "ok", reply
        return reply


def text(reply):
    return (reply["result"] or {}).get("text/plain")


def test_small_and_large_state_round_trips_between_cells(faast_notebook):
    s = Session(faast_notebook)
    s.run("import numpy as np\nimport pandas as pd\n"
          "n = 41\nnested = {'a': [1, 2, {'b': (3, 4)}], 'c': 'text'}\n"
          "arr = np.arange(200_000, dtype=np.float64)\n"
          "df = pd.DataFrame({'x': np.arange(150_000), 'y': np.ones(150_000)})\n"
          "chunks = [pd.DataFrame({'v': np.full(140_000, float(i))}) for i in range(10)]")
    # Large objects: arr (1.6 MB), df (2.4 MB) and the ten chunks (1.1 MB each), one blob each.
    assert len([n for n in s.inputs.values() if n]) == 12, s.inputs
    reply = s.run("n + 1, nested['a'][2]['b'], float(arr.sum()), int(df['x'].sum()), [float(c['v'][0]) for c in chunks]")
    assert text(reply) == "(42, (3, 4), 19999900000.0, 11249925000, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])"


def test_a_large_object_is_written_again_only_when_it_changed_and_a_change_in_place_is_kept(faast_notebook):
    s = Session(faast_notebook)
    s.run("import numpy as np\nkept = np.zeros(300_000)\nchanged = np.zeros(300_000)")
    first = {n for n in s.inputs.values() if n}
    s.run("changed[0] = 5.0\nkept.sum()")  # in place: the loaded copies are writable
    second = {n for n in s.inputs.values() if n}
    assert len(first) == 2 and len(second) == 2
    assert len(first & second) == 1, "the unchanged array keeps its blob; the changed one has a new one"
    assert text(s.run("float(changed[0]), float(kept.sum())")) == "(5.0, 0.0)"


def test_functions_classes_and_imports_defined_in_cells_come_back(faast_notebook):
    s = Session(faast_notebook)
    s.run("import math\nfrom collections import Counter\n"
          "def area(r):\n    return math.pi * r * r\n"
          "class Box:\n    def __init__(self, v):\n        self.v = v\n    def twice(self):\n        return 2 * self.v\n"
          "box = Box(21)\ncounts = Counter('abca')")
    assert text(s.run("round(area(1), 4), box.twice(), counts['a'], type(box).__name__")) == "(3.1416, 42, 2, 'Box')"


def test_an_unpicklable_variable_is_named_in_a_warning_and_the_rest_of_the_state_is_kept(faast_notebook):
    s = Session(faast_notebook)
    reply = s.run("import socket, threading\nsock = socket.socket()\nlock = threading.Lock()\nkeep = [1, 2]")
    warned = " ".join(reply["warnings"])
    assert "sock:" in warned and "lock:" in warned, reply["warnings"]
    assert text(s.run("keep, 'sock' in dir(), 'lock' in dir()")) == "([1, 2], False, False)"


def test_a_cell_that_raises_shows_its_traceback_and_the_state_goes_on(faast_notebook):
    s = Session(faast_notebook)
    s.run("total = 10")
    status, reply = s.post("def inner():\n    return 1 / 0\ntotal += 5\ninner()")
    assert status == 200 and reply["status"] == "error"
    assert reply["ename"] == "ZeroDivisionError"
    assert any("inner" in line for line in reply["traceback"]), reply["traceback"]
    assert not any("jupyterless_executor" in line for line in reply["traceback"]), reply["traceback"]
    # What the cell did before it raised is kept, as in IPython's namespace.
    assert text(s.run("total")) == "15"


def test_display_data_a_matplotlib_figure_as_png_and_a_dataframe_as_html(faast_notebook):
    s = Session(faast_notebook)
    reply = s.run("import matplotlib.pyplot as plt\nimport pandas as pd\n"
                  "plt.plot([1, 3, 2])\nplt.title('t')\npd.DataFrame({'a': [1, 2]})")
    png = [d for d in reply["displays"] if "image/png" in d["data"]]
    assert len(png) == 1
    assert base64.b64decode(png[0]["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert "<table" in reply["result"]["text/html"]
    reply = s.run("from IPython.display import display\ndisplay(pd.DataFrame({'b': [3]}))\nprint('after')")
    assert reply["stdout"] == "after\n"
    assert "<table" in reply["displays"][0]["data"]["text/html"]


def test_magics_time_and_matplotlib_inline_work_and_others_are_refused_by_name(faast_notebook):
    s = Session(faast_notebook)
    assert "Wall time" in s.run("%%time\nx = sum(range(1000))")["stdout"]
    assert "Wall time" in s.run("%matplotlib inline\nimport math\n%time y = x + 1")["stdout"]
    assert text(s.run("math.floor(2.5)")) == "2"  # the import in a cell with magics is kept
    assert text(s.run("y")) == "499501"
    s.run("'a'")
    s.run("'b'")
    assert text(s.run("(_, __)")) == "('b', 'a')"
    status, reply = s.post("%load_ext foo")
    assert reply["status"] == "error" and "%load_ext" in reply["evalue"]
    status, reply = s.post("!ls")
    assert reply["status"] == "error" and "!ls" in reply["evalue"]


def test_stdin_is_refused_clearly(faast_notebook):
    s = Session(faast_notebook)
    status, reply = s.post("name = input('who?')")
    assert reply["status"] == "error" and "stdin is not available in JupyterLess" in reply["evalue"]
    status, reply = s.post("import sys\nsys.stdin.readline()")
    assert reply["status"] == "error" and "stdin is not available in JupyterLess" in reply["evalue"]


def test_files_in_the_working_directory_are_kept_between_cells(faast_notebook):
    s = Session(faast_notebook)
    s.run("import os\nos.makedirs('out', exist_ok=True)\nopen('out/notes.txt', 'w').write('kept')")
    assert text(s.run("open('out/notes.txt').read()")) == "'kept'"


def test_a_cell_without_the_function_key_or_with_a_wrong_one_is_refused_and_runs_nothing(faast_notebook):
    s = Session(faast_notebook)
    status, reply = s.post("marker = 1", key=None)
    assert status == 401, reply
    status, reply = s.post("marker = 1", key="not-the-key")
    assert status == 401, reply
    assert text(s.run("'marker' in dir()")) == "False"


def test_a_malformed_request_is_a_400_naming_what_is_wrong(faast_notebook):
    jl = faast_notebook
    status, reply = jl.post("execute", {"session": "../other", "code": "1", **{f"in{i}": None for i in range(SLOTS)},
                                         **{f"out{i}": None for i in range(SLOTS)}}, key=jl.key)
    assert status == 400 and "session" in json.dumps(reply), (status, reply)


def test_a_stale_request_runs_nothing_and_names_the_inputs_to_bind(faast_notebook):
    s = Session(faast_notebook)
    s.run("import numpy as np\nbig = np.ones(300_000)")
    other = Session(faast_notebook)
    other.id = s.id  # another tab of the same session, which has not seen the large object
    status, reply = faast_notebook.post("execute", other.body("big.sum()"), key=faast_notebook.key)
    assert status == 200 and reply["status"] == "stale"
    assert set(n for n in reply["large"].values() if n) == set(n for n in s.inputs.values() if n)
    other.inputs = reply["large"]
    assert text(other.run("float(big.sum())")) == "300000.0"


def commit_from_inside(jl, s, code):
    """Code for a cell that posts `code` as another cell of its own session and checks it ran (the executor has two
    workers, so the inner cell commits while the outer one runs). It binds no name: no import statement, no
    assignment (the modules come from __import__), so the outer cell's own writes are only what follows it."""
    inner = json.dumps(s.body(code))
    return ("assert __import__('json').loads(__import__('urllib.request').request.urlopen(\n"
            f"    __import__('urllib.request').request.Request({jl.executor_url + '/api/execute'!r}, data={inner!r}.encode(),\n"
            f"        headers={{'content-type': 'application/json', 'x-functions-key': {jl.key!r}}}),\n"
            "    timeout=300).read())['status'] == 'ok'\n")


def test_two_writers_of_one_session_from_the_same_version_the_later_commit_is_refused_with_409(faast_notebook):
    """A cell posts a second cell of its own session and waits for it (the executor has two workers): the second
    commits first; the first, which read the version before, is refused and nothing of it is kept."""
    s = Session(faast_notebook)
    s.run("shared = 'before'")
    status, reply = s.post(commit_from_inside(faast_notebook, s, "shared = 'second'") + "shared = 'first'")
    assert status == 409, (status, reply)
    assert reply["error"] == "conflict" and reply["binding"] == "stateOut" and "state.pkl" in reply["blob"], reply
    assert text(s.run("shared")) == "'second'"


def test_a_cell_that_changes_nothing_writes_no_state_and_so_never_conflicts(faast_notebook):
    """A cell that binds no name (no import statement, no assignment, no value left in _) reads the state and leaves
    it: while it runs, a cell of the same session commits (posted from inside it, as above), and the read-only cell
    still succeeds, where the writing cell of the test above gets 409. A cell that assigns still writes."""
    s = Session(faast_notebook)
    assert s.run("shared = 'before'")["state_written"] is True
    status, reply = s.post(commit_from_inside(faast_notebook, s, "shared = 'second'") + "print(shared)")
    assert status == 200 and reply["status"] == "ok", (status, reply)
    assert reply["state_written"] is False and reply["stdout"] == "before\n", reply
    after = s.run("shared")
    assert text(after) == "'second'" and after["state_written"] is True  # _ took a new value


def test_reset_clears_the_session(faast_notebook):
    s = Session(faast_notebook)
    s.run("gone = 1")
    status, reply = faast_notebook.post("reset", {"session": s.id}, key=faast_notebook.key)
    assert status == 200, reply
    s.inputs = {f"in{i}": None for i in range(SLOTS)}
    reply = s.run("'gone' in dir()")
    assert text(reply) == "False" and reply["execution_count"] == 1



def test_a_cell_binds_only_the_large_objects_it_names_and_the_others_are_kept(faast_notebook):
    """The reply's needs map says which blobs each name needs; a cell that names none binds none (the cache neither
    reads nor pins them, the executor does not copy them) and the variables it did not load are kept as they were;
    a cell naming one without binding it is stale."""
    s = Session(faast_notebook)
    reply = s.run("import numpy as np\ncolumn = np.arange(300_000, dtype=np.float64)\nother = np.ones(300_000)\nn = 3")
    needs = reply["needs"]
    assert len(needs["column"]) == 1 and len(needs["other"]) == 1 and needs["column"] != needs["other"], needs
    assert "n" not in needs and "globals" in reply["dynamic"]
    full = dict(s.inputs)
    s.inputs = {k: None for k in full}  # bind nothing
    status, reply = faast_notebook.post("execute", s.body("n = n + 1\nseen = 'other' in dir()"), key=faast_notebook.key)
    assert status == 200 and reply["status"] == "stale", reply  # 'dir' reaches every variable: all must be bound
    s.inputs = reply["large"]
    assert s.run("n = n + 1\nseen = 'other' in dir()")["status"] == "ok"
    s.inputs = {k: None for k in full}
    status, reply = s.post("m = n * 2")
    assert status == 200 and reply["status"] == "ok", reply
    assert reply["state_written"] is True and sorted(n for n in reply["large"].values() if n) == sorted(
        n for n in full.values() if n), "the unloaded arrays are still in the state"
    only_column = {k: (v if v in needs["column"] else None) for k, v in full.items()}
    s.inputs = dict(only_column)
    status, reply = s.post("column[0] = 42.0")
    assert status == 200 and reply["status"] == "ok", reply
    s.inputs = {k: None for k in full}
    status, reply = faast_notebook.post("execute", s.body("total = float(column.sum())"), key=faast_notebook.key)
    assert status == 200 and reply["status"] == "stale", reply
    s.inputs = reply["large"]
    assert text(s.run("float(column.sum()), float(other.sum()), m")) == f"({sum(range(300_000)) + 42.0}, 300000.0, 8)"
