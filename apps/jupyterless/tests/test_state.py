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


def _saved(namespace, definitions=()):
    fresh = [f"blob-{i}" for i in range(8)]
    state, writes, _ = st.save(namespace, st.Loaded({}, {}, [], []), fresh, list(definitions), 1, {})
    return st.decode_state(st.encode_state(state)), {n: memoryview(d) for n, d in writes.items()}


def test_a_cell_needs_the_large_objects_of_the_names_it_uses_and_of_those_sharing_them():
    shared = np.ones(300_000)
    state, _ = _saved({"column": np.zeros(300_000), "a": shared, "pair": [shared, np.ones(200_000)], "n": 3})
    column = state.uses["column"]
    group = sorted(set(state.uses["a"]) | set(state.uses["pair"]))
    assert len(column) == 1 and len(group) == 2 and not set(column) & set(group)
    assert st.required("print(n)", state) == []
    assert st.required("column.sum()", state) == column
    # a and pair hold one array: binding either brings both, so a change in place through one is seen in the other.
    assert st.required("a[0] = 5", state) == group and st.required("len(pair)", state) == group
    # Words in strings and comments count (never too few); dynamic access binds everything.
    assert st.required("# column\nprint(1)", state) == column
    assert st.required("globals()['column']", state) == sorted(state.large)


def test_a_function_needs_what_the_globals_in_its_source_need_transitively():
    definitions = st.definitions_of("def total():\n    return column.sum()\n\ndef report():\n    return total()\n\n"
                                    "def sneaky():\n    return eval('column')\n")
    state, _ = _saved({"column": np.zeros(300_000), "other": np.ones(300_000)}, definitions)
    assert st.required("report()", state) == state.uses["column"]
    assert st.required("sneaky()", state) == sorted(state.large)


def test_variables_whose_blobs_were_not_bound_are_carried_over_unchanged_and_the_rest_is_saved():
    state, blobs = _saved({"column": np.zeros(300_000), "arr": np.ones(300_000), "n": 1})
    arr_blob = state.uses["arr"][0]
    target = {}
    loaded = st.load(state, {arr_blob: blobs[arr_blob]}, target, bound={arr_blob})
    assert sorted(target) == ["arr", "n"] and loaded.warnings == [] and list(loaded.carried) == ["column"]
    target["arr"][0] = 7.0
    target["n"] = 2
    again, writes, _ = st.save(target, loaded, ["fresh-0"], [], 2, {}, state.large)
    assert list(writes) == ["fresh-0"]  # only the changed array
    assert again.variables["column"] == state.variables["column"] and again.uses["column"] == state.uses["column"]
    assert sorted(again.large) == sorted([state.uses["column"][0], "fresh-0"])
    assert again.large[state.uses["column"][0]] == state.large[state.uses["column"][0]]
    # Loaded again with everything bound, the carried column is intact.
    blobs["fresh-0"] = memoryview(writes["fresh-0"])
    final = {}
    st.load(st.decode_state(st.encode_state(again)), blobs, final)
    assert float(final["column"].sum()) == 0.0 and float(final["arr"][0]) == 7.0 and final["n"] == 2


def test_a_state_saved_without_the_uses_map_binds_everything():
    state, _ = _saved({"column": np.zeros(300_000), "n": 1})
    state.uses = None
    assert st.required("print(n)", state) == sorted(state.large)
