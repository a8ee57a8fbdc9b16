"""The executor app against the real platform (`./faast start apps/jupyterless/executor`, conftest.py):
state round trips, display data, errors, keys, conflicts and `stale`, through the request/reply JSON of
the contract (notes: jupyterless-contract.md, Part B)."""
import base64
import glob
import os
import secrets

import pytest

from conftest import ROOT, post

# Part A of issue 23 (branch jl-bind) gives the runtime the two binding features the executor's
# function.json relies on. Until they are merged here, the tests that need them are skipped, naming them.
A2 = "null blob input paths (Part A2, branch jl-bind)"
A1 = "\"ifMatch\" conditional blob outputs (Part A1, branch jl-bind)"


def _app_model_reads(text: str) -> bool:
    """Whether function.json's loader (src/AppModel) knows a binding property, e.g. '"ifMatch"'."""
    for path in glob.glob(os.path.join(ROOT, "src", "AppModel", "**", "*.cs"), recursive=True):
        with open(path, encoding="utf-8", errors="replace") as f:
            if text in f.read():
                return True
    return False


class Kernel:
    """What the kernel (Part C) does per cell: the session id, the `large` map, fresh out names."""

    def __init__(self, platform, session=None, nulls=True):
        self.p = platform
        self.session = session or secrets.token_hex(16)
        self.large = {}
        # Unused input slots are null (the contract; Part A2). Without A2 they name blobs that do not exist,
        # which bind None just as well (a missing blob), at the cost of one storage read each.
        self.nulls = nulls

    def body(self, code, **extra):
        prefix = secrets.token_hex(8)
        b = {"session": self.session, "code": code, "silent": False, "store_history": True}
        for i in range(32):
            b[f"in{i}"] = self.large.get(f"in{i}", None if self.nulls else f"absent-{i}")
            b[f"out{i}"] = f"{prefix}-{i}"
        b.update(extra)
        return b

    def send(self, body, key=True):
        return post(self.p.url + "/api/execute", body, self.p.key if key else None)

    def run(self, code, **extra):
        status, reply = self.send(self.body(code, **extra))
        if status == 200 and reply["status"] == "stale":  # as the kernel: resend once with `large`
            self.large = reply["large"]
            status, reply = self.send(self.body(code, **extra))
        assert status == 200, reply
        if reply["status"] != "stale":
            self.large = reply["large"]
        return reply


@pytest.fixture(scope="session")
def nulls(platform):
    """Whether the runtime binds a null input path as None (A2); the tests run either way."""
    k = Kernel(platform)
    status, reply = k.send(k.body("1"))
    if status == 400 and "null" in str(reply):
        return False
    assert status == 200, reply
    return True


def test_null_input_paths_bind_none(platform, nulls):
    if not nulls:
        pytest.skip(f"the runtime lacks {A2}")
    k = Kernel(platform)
    assert k.run("1 + 1")["result"]["text/plain"] == "2"


def test_401_without_the_function_key(platform):
    k = Kernel(platform)
    status, reply = k.send(k.body("1"), key=False)
    assert status == 401, reply
    status, reply = post(platform.url + "/api/reset", {"session": k.session})
    assert status == 401, reply


def test_reset_writes_an_empty_state(platform):
    k = Kernel(platform)
    status, reply = post(platform.url + "/api/reset", {"session": k.session}, platform.key)
    assert status == 200 and reply["status"] == "ok", reply
    status, reply = post(platform.url + "/api/reset", {"session": "not-hex"}, platform.key)
    assert status == 400, reply


def test_round_trips_ints_dicts_numpy_pandas(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    r = k.run("import numpy as np, pandas as pd\nn = 41\nd = {'a': {'b': [1, (2, 'c')]}}\n"
              "arr = np.arange(400_000, dtype='int64')\n"
              "df = pd.DataFrame({'x': np.arange(150_000), 'y': np.linspace(0, 1, 150_000)})\n"
              "small = pd.Series([1, 2, 3])")
    assert r["status"] == "ok" and r["execution_count"] == 1, r
    assert len(r["large"]) == 2, r["large"]
    r = k.run("n + 1, d['a']['b'][1][1], int(arr.sum()), int(df.x.sum()), small.tolist()")
    assert r["status"] == "ok", r
    assert r["result"]["text/plain"] == "(42, 'c', 79999800000, 11249925000, [1, 2, 3])"
    before = dict(k.large)
    r = k.run("df.loc[0, 'x'] = 1000  # in place")
    assert r["status"] == "ok", r
    changed = [slot for slot in r["large"] if r["large"][slot] not in before.values()]
    assert len(changed) == 1  # only the DataFrame's blob is new; the array's is reused
    assert k.run("int(df.x.sum())")["result"]["text/plain"] == "11249926000"


def test_list_of_ten_dataframe_chunks(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    r = k.run("import numpy as np, pandas as pd\n"
              "chunks = [pd.DataFrame({'v': np.full(140_000, float(i))}) for i in range(10)]")
    assert r["status"] == "ok", r
    assert len(r["large"]) == 10
    r = k.run("sum(float(c.v.sum()) for c in chunks)")
    assert r["result"]["text/plain"] == str(float(sum(i * 140_000 for i in range(10))))


def test_unpicklable_socket_named_in_warnings(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    r = k.run("import socket\ns = socket.socket()\nkept = [1, 2]")
    assert r["status"] == "ok", r
    assert any("'s'" in w and "socket" in w for w in r["warnings"]), r["warnings"]
    assert k.run("kept, 's' in dir()")["result"]["text/plain"] == "([1, 2], False)"


def test_display_data_png_and_html(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    r = k.run("import matplotlib.pyplot as plt, pandas as pd\nplt.plot([1, 3, 2])\nplt.title('t')\n"
              "pd.DataFrame({'a': [1, 2]})")
    assert r["status"] == "ok", r
    pngs = [d["data"]["image/png"] for d in r["displays"] if "image/png" in d["data"]]
    assert len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n")
    assert "<table" in r["result"]["text/html"] and "text/plain" in r["result"]


def test_error_keeps_the_state(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    k.run("x = 7")
    r = k.run("print('before')\nraise ValueError('boom')")
    assert r["status"] == "error" and r["ename"] == "ValueError" and r["evalue"] == "boom", r
    assert r["stdout"] == "before\n" and r["traceback"]
    assert k.run("x * 6")["result"]["text/plain"] == "42"


def test_stale_when_the_manifest_is_not_bound(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    k.run("import numpy as np\nbig = np.ones(200_000)")
    other = Kernel(platform, session=k.session, nulls=nulls)  # another tab: no `large` yet
    status, reply = other.send(other.body("float(big.sum())"))
    assert status == 200 and reply["status"] == "stale", reply
    assert reply["large"] == k.large
    other.large = reply["large"]
    assert other.run("float(big.sum())")["result"]["text/plain"] == "200000.0"


@pytest.mark.skipif(not _app_model_reads('"ifMatch"'), reason=f"the runtime lacks {A1}")
def test_conflict_two_requests_from_one_version(platform, nulls):
    k = Kernel(platform, nulls=nulls)
    k.run("c = 0")
    a, b = k.body("c += 1"), k.body("c += 10")  # both from the same version of state.pkl
    s1, r1 = k.send(a)
    s2, r2 = k.send(b)
    assert s1 == 200 and r1["status"] == "ok", r1
    assert s2 == 409 and r2["error"] == "conflict" and r2["binding"] == "stateOut", r2
    assert k.run("c")["result"]["text/plain"] == "1"


def test_bad_session_is_400_and_magics_are_named(platform, nulls):
    k = Kernel(platform, session="0123", nulls=nulls)
    status, reply = k.send(k.body("1"))
    assert status == 400 and "session" in reply["message"], reply
    k = Kernel(platform, nulls=nulls)
    r = k.run("%%bash\necho hi")
    assert r["status"] == "error" and "%%bash" in r["evalue"], r
    r = k.run("%time v = sum(range(100))\nv")
    assert "Wall time" in r["stdout"] and r["result"]["text/plain"] == "4950", r
