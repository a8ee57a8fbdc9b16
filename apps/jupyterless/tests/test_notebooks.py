"""The sample notebooks (apps/jupyterless/notebooks) executed headless with nbclient through the JupyterLess kernel,
against the executor of ./faast notebook's platform, small sizes given through each notebook's "parameters" cell, and
their outputs checked. One runs through `jupyter nbconvert --execute`, unchanged."""

import base64
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytest_plugins = ["conftest_kernel"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CELL_TIMEOUT = 600  # seconds for one cell on a busy machine


def load(name, **parameters):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    if parameters:
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        cell.source = "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    return nb


def run(faast_notebook, nb, workdir, monkeypatch, repeat=None):
    """Executes every cell in order (a cell tagged `repeat[0]` repeat[1] times); returns the notebook."""
    monkeypatch.setenv("JUPYTER_PATH", str(faast_notebook.run_dir / "jupyter"))
    client = NotebookClient(nb, kernel_name="jupyterless", timeout=CELL_TIMEOUT, startup_timeout=120,
                            resources={"metadata": {"path": str(workdir)}})
    with client.setup_kernel(env=faast_notebook.kernel_env()):
        for index, cell in enumerate(nb.cells):
            times = repeat[1] if repeat and repeat[0] in cell.metadata.get("tags", []) else 1
            for _ in range(times):
                client.execute_cell(cell, index)
    return nb


def text_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def pngs_of(cell):
    return [base64.b64decode(o.data["image/png"]) for o in cell.outputs
            if o.output_type == "display_data" and "image/png" in o.data]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def no_errors(nb):
    errors = [o for c in code_cells(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors, errors


def test_noop(faast_notebook, tmp_path, monkeypatch):
    nb = run(faast_notebook, load("noop"), tmp_path, monkeypatch)
    no_errors(nb)
    assert text_of(code_cells(nb)[-1]) == "no-op\n"


def test_noop_through_nbconvert_unchanged(faast_notebook, tmp_path):
    env = faast_notebook.kernel_env()
    out = tmp_path / "noop.out.ipynb"
    subprocess.run(["/usr/bin/python3", "-m", "nbconvert", "--to", "notebook", "--execute",
                    f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}", "--output", str(out), str(NOTEBOOKS / "noop.ipynb")],
                   env=env, cwd=tmp_path, check=True, timeout=CELL_TIMEOUT + 120, capture_output=True)
    nb = nbformat.read(out, as_version=4)
    assert nb.metadata.kernelspec.name == "jupyterless"
    assert text_of(code_cells(nb)[-1]) == "no-op\n"


def test_column_sum(faast_notebook, tmp_path, monkeypatch):
    # 20 MiB in 10 chunks of 2 MiB: each chunk still a large object (a blob of its own).
    nb = run(faast_notebook, load("column-sum", TOTAL_MB=20, CHUNKS=10), tmp_path, monkeypatch)
    no_errors(nb)
    cells = code_cells(nb)
    assert "10 chunks of 262,144 rows, 20 MiB in all" in text_of(cells[1])
    n = 262_144 * 10
    assert text_of(cells[2]) == f"sum of {n:,} values = {n * (n - 1) // 2}\n"


def test_capacity_planning(faast_notebook, tmp_path, monkeypatch):
    nb = run(faast_notebook, load("capacity-planning", DAYS=60, CAPACITY=0.8, SEED=7), tmp_path, monkeypatch)
    no_errors(nb)
    cells = code_cells(nb)
    assert "collected 1,440 samples over 60 days" in text_of(cells[1])
    # The second cell reads usage.csv, which the first wrote in the session's working directory.
    forecast = re.search(r"80% reached in (\d+) days", text_of(cells[2]))
    assert forecast and 0 < int(forecast.group(1)) < 1000, text_of(cells[2])
    pngs = pngs_of(cells[3])
    assert len(pngs) == 1 and pngs[0].startswith(b"\x89PNG") and len(pngs[0]) > 10_000


def test_counter(faast_notebook, tmp_path, monkeypatch):
    target = 25
    nb = run(faast_notebook, load("counter", TARGET=target), tmp_path, monkeypatch, repeat=("increment", target))
    no_errors(nb)
    cells = code_cells(nb)
    increment = next(c for c in cells if "increment" in c.metadata.get("tags", []))
    # The last run's outputs are the cell's: the count after the last increment.
    assert [o.data["text/plain"] for o in increment.outputs if o.output_type == "execute_result"] == [str(target)]
    assert text_of(cells[-1]) == f"count = {target} of {target}\n"


def test_characterization(faast_notebook, tmp_path, monkeypatch):
    nb = run(faast_notebook, load("characterization", ACCESSES=20_000, APPS=20, SEED=1), tmp_path, monkeypatch)
    no_errors(nb)
    cells = code_cells(nb)
    assert "20,000 accesses of 20 apps" in text_of(cells[1])
    summary = next(o for o in cells[2].outputs if o.output_type == "execute_result")
    assert "<table" in summary.data["text/html"]
    values = dict(re.findall(r"^(\S.*?\S)\s{2,}(\S+)$", summary.data["text/plain"], re.M))
    assert 0.74 <= float(values["reads (fraction)"]) <= 0.81, values
    assert 0.7 <= float(values["blobs under 12 KB (fraction)"]) <= 0.9, values
    pngs = pngs_of(cells[3])
    assert len(pngs) == 1 and pngs[0].startswith(b"\x89PNG")
