"""jupyterless_state's own logic, in this process (no platform): the large-object format, the comparison that
decides what is written, definitions and imports kept from a cell's source, and the working directory's limit."""

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "executor"))

import jupyterless_state as st  # noqa: E402


def test_a_large_object_round_trips_into_writable_copies():
    df = pd.DataFrame({"a": np.arange(200_000, dtype=np.float64), "b": np.arange(200_000)})
    blob = memoryview(st.join(st.dump_large(df)))
    back = st.load_large(blob)
    pd.testing.assert_frame_equal(df, back)
    back.loc[0, "a"] = 7.0  # a copy: writable, and not the blob's memory
    assert back.loc[0, "a"] == 7.0
    assert st.load_large(blob).loc[0, "a"] == 0.0


def test_parts_equal_tells_an_unchanged_object_from_a_changed_one():
    arr = np.arange(300_000, dtype=np.float64)
    blob = memoryview(st.join(st.dump_large(arr)))
    assert st.parts_equal(st.dump_large(arr.copy()), blob)
    arr[-1] = -1
    assert not st.parts_equal(st.dump_large(arr), blob)


def test_what_is_large():
    assert st.large_size(np.zeros(st.LARGE_MIN // 8)) == st.LARGE_MIN
    assert st.large_size(np.zeros(10)) == 80
    assert st.large_size(pd.DataFrame({"s": ["text"] * 10})) == 0  # Python objects: the small state's
    assert st.large_size([1, 2]) == 0


def test_a_saved_namespace_loads_back_and_an_unpicklable_variable_is_named():
    namespace = {"n": 1, "arr": np.ones(300_000), "pair": (np.zeros(200_000), "x"), "gen": (i for i in range(3))}
    empty = st.Loaded({}, {}, [], [])
    state, writes, warnings = st.save(namespace, empty, ["a-0", "b-1", "c-2"], [], 1, {})
    assert sorted(writes) == ["a-0", "b-1"] and sorted(state.large) == ["a-0", "b-1"]
    assert any(w.startswith("gen:") for w in warnings), warnings
    blobs = {name: memoryview(data) for name, data in writes.items()}
    target = {}
    loaded = st.load(st.decode_state(st.encode_state(state)), blobs, target)
    assert target["n"] == 1 and float(target["arr"].sum()) == 300_000.0 and target["pair"][1] == "x"
    # Saved again unchanged: nothing is written, the same names are kept.
    again, writes, _ = st.save(target, loaded, ["d-0"], [], 2, {})
    assert writes == {} and sorted(again.large) == ["a-0", "b-1"]


def test_a_cells_definitions_and_imports_are_kept_in_order_and_redefinition_replaces():
    code = "import math\n@staticmethod\ndef f(x):\n    return x\nclass C:\n    pass\ny = 1\n"
    found = st.imports_of(code) + st.definitions_of(code)
    assert [d.name for d in found] == ["import@1", "f", "C"]
    assert found[1].source.startswith("@staticmethod")
    merged = st.merge_definitions(found, st.definitions_of("def f(x):\n    return 2 * x\n"))
    assert [d.name for d in merged] == ["import@1", "C", "f"] and "2 * x" in merged[-1].source


def test_the_working_directory_keeps_files_up_to_its_limit_and_names_the_rest(tmp_path):
    (tmp_path / "small.txt").write_bytes(b"x" * 10)
    (tmp_path / "big.bin").write_bytes(b"y" * 100)
    files, warnings = st.read_files(str(tmp_path), limit=50)
    assert files == {"small.txt": b"x" * 10}
    assert len(warnings) == 1 and "big.bin" in warnings[0]
    target = tmp_path / "copy"
    st.write_files(str(target), {"a/b.txt": b"z"})
    assert (target / "a" / "b.txt").read_bytes() == b"z"


def test_a_large_object_whose_blob_is_missing_is_named_lost_and_the_rest_loads():
    namespace = {"big": np.ones(300_000), "small": 5}
    state, writes, _ = st.save(namespace, st.Loaded({}, {}, [], []), ["a-0"], [], 1, {})
    target = {}
    loaded = st.load(state, {}, target)  # storage lacks a-0: the input bound nothing
    assert target == {"small": 5}
    assert len(loaded.warnings) == 1 and loaded.warnings[0].startswith("big:"), loaded.warnings
