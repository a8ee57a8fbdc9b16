"""A person's view: the classic notebook UI of ./faast notebook's server in headless Chromium (Debian's chromium and
chromedriver through python3-selenium), a notebook with the JupyterLess kernel that plots, run from the UI; the
screenshot of the plot must not be blank. Waits are for conditions in the page, with generous deadlines."""

import io
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

pytest_plugins = ["conftest_kernel"]
pytest.register_assert_rewrite("conftest_kernel")

from conftest_kernel import HOME, processes_mentioning, wait_for  # noqa: E402

PLOT = ("import matplotlib.pyplot as plt\n"
        "%matplotlib inline\n"
        "fig, ax = plt.subplots(figsize=(6, 4))\n"
        "ax.plot(range(20), [x * x for x in range(20)], marker='o', label='x squared')\n"
        "ax.fill_between(range(20), 0, [x * x for x in range(20)], alpha=0.3)\n"
        "ax.set_title('Plotted on FaaST')\n"
        "legend = ax.legend()\n"
        "print('plotted')")


def distinct_colours(png):
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height)
    white = sum(n for n, c in colours if c == (255, 255, 255))
    return len(colours), 1 - white / (image.width * image.height)


@pytest.fixture
def browser(tmp_path):
    profile = tmp_path / "chromium-profile"
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1100", f"--user-data-dir={profile}", "--no-first-run"):
        options.add_argument(argument)
    service = Service("/usr/bin/chromedriver", log_path=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(300)
        yield driver
    finally:
        driver.quit()
        wait_for(lambda: not processes_mentioning(str(profile)), 60, "Chromium to end")


def test_a_cell_that_plots_from_the_notebook_ui(faast_notebook, browser, tmp_path):
    nb = new_notebook(cells=[new_code_cell(PLOT)], metadata={
        "kernelspec": {"name": "jupyterless", "display_name": "JupyterLess (FaaST)", "language": "python"}})
    nbformat.write(nb, faast_notebook.notebook_dir / "plot.ipynb")

    browser.get(f"{faast_notebook.notebook_url}/notebooks/plot.ipynb?token={faast_notebook.token}")
    # The notebook is open and its kernel (JupyterLess, the default) is connected.
    wait_for(lambda: browser.execute_script(
        "return !!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel"
        " && Jupyter.notebook.kernel.is_connected() && Jupyter.notebook.kernel.name === 'jupyterless')"),
        300, "the notebook's JupyterLess kernel to connect")
    # Shift-Enter on the cell, as a person would.
    cell = browser.find_element(By.CSS_SELECTOR, ".cell.code_cell")
    cell.click()
    browser.execute_script("Jupyter.notebook.select(0); Jupyter.notebook.execute_cell();")

    def plotted():
        images = browser.find_elements(By.CSS_SELECTOR, ".output_png img")
        loaded = [i for i in images if browser.execute_script("return arguments[0].naturalWidth", i) > 0]
        return loaded[0] if loaded else None

    image = wait_for(plotted, 600, "the plot to appear under the cell", interval=1)
    out = browser.find_element(By.CSS_SELECTOR, ".output_area .output_text").text
    assert "plotted" in out
    prompt = browser.find_element(By.CSS_SELECTOR, ".input_prompt").text
    assert prompt.replace("\xa0", " ").strip() == "In [1]:", prompt

    png = image.screenshot_as_png  # (Selenium scrolls the element into view)
    page = browser.get_screenshot_as_png()
    (tmp_path / "plot.png").write_bytes(png)
    (tmp_path / "notebook.png").write_bytes(page)
    logs = HOME / ".faast" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "notebook.png", logs / "jupyterless-notebook.png")

    colours, ink = distinct_colours(png)
    assert colours >= 50, f"the plot's screenshot has {colours} colours only (blank?)"
    assert 0.02 < ink < 0.95, f"{ink:.1%} of the plot's screenshot is not white"
