"""The JupyterLess kernel: a Jupyter kernel whose cells run as invocations of the executor function app.

An ipykernel ``Kernel`` subclass (Debian's python3-ipykernel 6.17 under /usr/bin/python3). Each cell is POSTed to
``{url}/api/execute`` with the app's function key in the ``x-functions-key`` header; the executor runs it against the
session's state (blobs through the cache) and the kernel renders its reply as Jupyter does: streams, display_data,
execute_result and errors with their tracebacks. Nothing runs in this process but the HTTP client.

Configuration (never the kernelspec's argv, never a world-readable file):
  JUPYTERLESS_URL, JUPYTERLESS_KEY   the executor's base URL (http://127.0.0.1:PORT) and its function key, or
  JUPYTERLESS_CONFIG                 a JSON file {"url": ..., "key": ...} readable by its owner only (0600; the
                                     launcher, ./faast notebook, writes it); the environment wins over the file
  JUPYTERLESS_TIMEOUT                seconds one cell may take before the kernel gives up on its reply
                                     (default 330: the executor's functionTimeout of 5 minutes plus a margin)

Behaviour:
  * The session is ``secrets.token_hex(16)``, made when the kernel starts; a restart starts a new kernel process, so a
    new (empty) session, and the old one is reset (``api/reset``) when the kernel is shut down for the restart.
  * Large variables live in blobs of their own: the kernel keeps the map the executor returns (``large``: in0..in31 ->
    blob name) and sends of it what the next cell needs, with 32 fresh output names (``<token_hex(8)>-<i>``) per
    cell: the executor's ``needs`` (name -> blobs) for each identifier-like word of the cell, all of them if the cell
    has one of the ``dynamic`` words (``globals``, ``eval``, ...). A ``stale`` reply (the cell needs large blobs this
    request did not bind) is sent again once with the reply's whole map.
  * Unused slots are null (the contract; the runtime binds a null blob path as None without touching storage). A
    runtime without that feature answers 400 before the function runs; the kernel then names absent blobs
    (``absent-<i>``, never a name it makes for a real object) for this kernel's life: they bind None too, at the
    cost of a lookup each.
  * A 409 from the runtime is a conflict (another writer committed this session's state first): shown as an error,
    nothing is resent.
  * Interrupt: the request in flight is abandoned and the cell ends at once with ``KeyboardInterrupt``. The invocation
    itself goes on in the executor until it ends or the function timeout (host.json functionTimeout) stops it; its
    state is then written only if nothing else committed first (the write is conditional), so an interrupted cell may
    still take effect if it finishes.
  * A lost runtime (connection refused, reset, a 5xx, no reply within the timeout) is an error naming the URL.
  * ``%matplotlib inline`` (and ``%matplotlib`` with inline/agg) lines are dropped here: the executor always renders
    open figures as image/png at the end of a cell. Other magics go to the executor (``%time``/``%%time`` run there;
    the rest answer a clear error naming the magic).
  * stdin: the executor refuses ``input()`` ("stdin is not available in JupyterLess").
  * Completion and inspection are not implemented (the defaults of ipykernel's Kernel: no matches, nothing found).
"""

import json
import os
import re
import secrets
import signal
import stat
import sys
import threading
import time
import urllib.error
import urllib.request

from ipykernel.kernelbase import Kernel

__version__ = "0.1"

SLOTS = 32  # in0..in31 / out0..out31: the executor's binding slots for large variables
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a cell's names, as the executor finds them (jupyterless_state.WORD)
DEFAULT_TIMEOUT = 330.0
RESET_TIMEOUT = 10.0
_MATPLOTLIB_LINE = re.compile(r"^\s*%matplotlib(\s+(inline|agg|Agg))?\s*(#.*)?$")


class ConfigError(Exception):
    pass


def load_config(environ=None):
    """The executor's URL and key from the environment, else from the 0600 file JUPYTERLESS_CONFIG names."""
    environ = os.environ if environ is None else environ
    url = environ.get("JUPYTERLESS_URL")
    key = environ.get("JUPYTERLESS_KEY")
    path = environ.get("JUPYTERLESS_CONFIG")
    if (not url or not key) and path:
        try:
            st = os.stat(path)
        except OSError as e:
            raise ConfigError(f"JUPYTERLESS_CONFIG names {path}, which cannot be read: {e.strerror}") from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"{path} (JUPYTERLESS_CONFIG) holds the executor's function key but is readable by others "
                f"(mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it")
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path} (JUPYTERLESS_CONFIG) is not a readable JSON file: {e}") from None
        url = url or doc.get("url")
        key = key or doc.get("key")
    if not url:
        raise ConfigError("the JupyterLess kernel has no executor URL: set JUPYTERLESS_URL (and JUPYTERLESS_KEY), "
                          "or JUPYTERLESS_CONFIG to a 0600 JSON file {\"url\": ..., \"key\": ...}; "
                          "./faast notebook does this for you")
    if not key:
        raise ConfigError(f"the JupyterLess kernel has no function key for {url}: set JUPYTERLESS_KEY, or \"key\" in "
                          "the JUPYTERLESS_CONFIG file")
    timeout = float(environ.get("JUPYTERLESS_TIMEOUT") or DEFAULT_TIMEOUT)
    return url.rstrip("/"), key, timeout


def strip_local_magics(code):
    """Drops the lines the executor does not need (%matplotlib inline: it always renders figures inline)."""
    lines = code.split("\n")
    kept = ["" if _MATPLOTLIB_LINE.match(line) else line for line in lines]
    return "\n".join(kept)


class CellFailure(Exception):
    """A cell that did not get a usable reply: ename/evalue as the notebook shows them."""

    def __init__(self, ename, evalue):
        super().__init__(evalue)
        self.ename = ename
        self.evalue = evalue


class JupyterLessKernel(Kernel):
    implementation = "jupyterless"
    implementation_version = __version__
    language = "python"
    language_version = "%d.%d" % sys.version_info[:2]
    language_info = {
        "name": "python",
        "version": "%d.%d.%d" % sys.version_info[:3],
        "mimetype": "text/x-python",
        "file_extension": ".py",
        "codemirror_mode": {"name": "ipython", "version": 3},
        "pygments_lexer": "ipython3",
        "nbconvert_exporter": "python",
    }
    banner = ("JupyterLess: each cell runs as an invocation of the executor function app on FaaST; "
              "the session's state lives in blobs behind the app's cache")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.session_id = secrets.token_hex(16)
        self.large = {f"in{i}": None for i in range(SLOTS)}
        self.needs = None  # name -> the large blobs a cell naming it must bind (the executor's last reply)
        self.dynamic = set()  # words that make a cell bind every large blob
        self.config_error = None
        try:
            self.url, self.key, self.timeout = load_config()
        except ConfigError as e:
            self.url, self.key, self.timeout = None, None, DEFAULT_TIMEOUT
            self.config_error = str(e)
        self.used = False  # whether a cell reached the executor (a reset is worth sending)
        self.null_slots_refused = False  # the runtime cannot bind null blob paths (then: names of absent blobs)
        self._interrupted = False  # SIGINT arrived while a request was being handled
        self._waiting = False  # the main thread waits for a reply: SIGINT raises KeyboardInterrupt there

    # ---- interrupts -----------------------------------------------------------------------------------------

    def pre_handler_hook(self):
        # ipykernel makes SIGINT raise KeyboardInterrupt anywhere in a handler, which can land in its own code before
        # do_execute runs; here it raises only while waiting for the executor, and is otherwise remembered for this
        # request (do_execute then ends at once).
        self.saved_sigint_handler = signal.signal(signal.SIGINT, self._on_sigint)

    def post_handler_hook(self):
        signal.signal(signal.SIGINT, self.saved_sigint_handler)
        self._interrupted = False

    def _on_sigint(self, signum, frame):
        self._interrupted = True
        if self._waiting:
            raise KeyboardInterrupt

    # ---- HTTP -----------------------------------------------------------------------------------------------

    def _post(self, function, body, timeout):
        """POSTs JSON to {url}/api/{function}; returns (status, parsed JSON or None, raw text). Raises CellFailure
        when the runtime cannot be reached or answers 5xx."""
        target = f"{self.url}/api/{function}"
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(target, data=data, method="POST", headers={
            "content-type": "application/json", "x-functions-key": self.key})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError,)) or "timed out" in str(reason):
                raise CellFailure("JupyterLessRuntimeError",
                                  f"the executor at {target} did not answer within {timeout:g} s ({reason}); "
                                  "the runtime may be lost or overloaded") from None
            raise CellFailure("JupyterLessRuntimeError",
                              f"cannot reach the executor at {target}: {reason}. Is the runtime "
                              "(./faast notebook, or ./faast start apps/jupyterless/executor) still running?") from None
        text = raw.decode("utf-8", "replace")
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = None
        if status >= 500:
            detail = (doc.get("error") or doc.get("message")) if isinstance(doc, dict) else text[:500]
            raise CellFailure("JupyterLessRuntimeError",
                              f"the executor at {target} failed: HTTP {status}" + (f": {detail}" if detail else ""))
        return status, doc, text

    def _post_interruptibly(self, function, body):
        """_post in a thread, waited for in short steps so that SIGINT (an interrupt) raises KeyboardInterrupt here
        at once; the abandoned request ends by itself (its thread is a daemon, its socket times out)."""
        box = {}

        def run():
            try:
                box["reply"] = self._post(function, body, self.timeout)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = e

        if self._interrupted:
            raise KeyboardInterrupt
        worker = threading.Thread(target=run, name=f"jupyterless-{function}", daemon=True)
        worker.start()
        self._waiting = True
        try:
            while worker.is_alive():
                if self._interrupted:
                    raise KeyboardInterrupt
                worker.join(0.1)
        finally:
            self._waiting = False
        if "error" in box:
            raise box["error"]
        return box["reply"]

    # ---- cells ----------------------------------------------------------------------------------------------

    def _inputs(self, code=None):
        """in0..in31: the large map, or with `code` only the blobs that cell needs (the executor's `needs` and
        `dynamic` from the last reply: each identifier-like word of the cell's text brings the blobs its name needs; a
        dynamic word, or no map yet, brings them all); unused slots null (the contract), or, on a runtime that
        cannot bind a null blob path, names of blobs that never exist (they bind None as well, at the cost of a
        lookup each)."""
        chosen = dict(self.large)
        if code is not None and self.needs is not None:
            words = set(WORD.findall(code))
            if not words & self.dynamic:
                wanted = {blob for word in words for blob in self.needs.get(word, ())}
                chosen = {k: (v if v in wanted else None) for k, v in chosen.items()}
        if not self.null_slots_refused:
            return chosen
        return {k: (v if v is not None else f"absent-{k[2:]}") for k, v in chosen.items()}

    def _request(self, code, silent, store_history):
        out_prefix = secrets.token_hex(8)
        body = {"session": self.session_id, "code": code, "silent": bool(silent),
                "store_history": bool(store_history)}
        body.update(self._inputs(code))
        body.update({f"out{i}": f"{out_prefix}-{i}" for i in range(SLOTS)})
        return body

    def _run_cell(self, code, silent, store_history):
        body = self._request(code, silent, store_history)
        stale_resent = False
        while True:
            status, doc, text = self._post_interruptibly("execute", body)
            self.used = True
            if status == 409:
                message = doc.get("message") if isinstance(doc, dict) else None
                raise CellFailure("JupyterLessConflict",
                                  "this session's state changed under this cell (another writer, e.g. a second tab "
                                  "or an interrupted cell that finished, committed first); the cell's effects were "
                                  "not saved. Run it again." + (f" ({message})" if message else ""))
            if status in (401, 403):
                raise CellFailure("JupyterLessAuthError",
                                  f"the executor at {self.url}/api/execute refused the function key (HTTP {status})")
            detail = str(doc.get("error")) if isinstance(doc, dict) else text
            if status == 400 and not self.null_slots_refused and "needs a value for {in" in detail and "is null" in detail:
                # The runtime refused the request before the function ran (no null blob paths, issue 23 Part A2):
                # nothing ran; from now on unused slots name absent blobs.
                self.null_slots_refused = True
                self.log.warning("JupyterLess: the runtime does not bind null blob paths; unused input slots now name "
                                 "absent blobs")
                body.update(self._inputs())
                continue
            if status != 200 or not isinstance(doc, dict) or "status" not in doc:
                raise CellFailure("JupyterLessRuntimeError",
                                  f"the executor at {self.url}/api/execute answered HTTP {status}: {text[:500]}")
            if doc.get("status") == "stale":
                if stale_resent or not isinstance(doc.get("large"), dict):
                    raise CellFailure("JupyterLessStateError",
                                      "the session's state names large objects the executor could not bind even "
                                      "after resending with its map; nothing ran")
                stale_resent = True
                self._remember_large(doc["large"], doc)
                body.update(self._inputs())  # everything the state names: always enough
                continue
            return doc

    def _remember_large(self, large, doc=None):
        if isinstance(large, dict):
            self.large = {f"in{i}": large.get(f"in{i}") for i in range(SLOTS)}
        if isinstance(doc, dict):
            needs, dynamic = doc.get("needs"), doc.get("dynamic")
            if isinstance(needs, dict) and isinstance(dynamic, list):
                self.needs, self.dynamic = needs, set(dynamic)
            else:
                self.needs = None  # an executor without the map: bind everything

    def _stream(self, name, text):
        if text:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _error_reply(self, ename, evalue, traceback, silent):
        content = {"status": "error", "ename": ename, "evalue": evalue, "traceback": traceback,
                   "execution_count": self.execution_count, "user_expressions": {}, "payload": []}
        if not silent:
            self.send_response(self.iopub_socket, "error",
                               {"ename": ename, "evalue": evalue, "traceback": traceback})
        return content

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kwargs):
        if self.config_error:
            return self._error_reply("JupyterLessConfigError", self.config_error,
                                     [f"JupyterLessConfigError: {self.config_error}"], silent)
        code = strip_local_magics(code)
        if not code.strip():
            return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}
        try:
            reply = self._run_cell(code, silent, store_history)
        except KeyboardInterrupt:
            message = ("the cell was abandoned; its invocation may still run in the executor until it ends or the "
                       "function timeout stops it")
            return self._error_reply("KeyboardInterrupt", message, [f"KeyboardInterrupt: {message}"], silent)
        except CellFailure as e:
            return self._error_reply(e.ename, e.evalue, [f"{e.ename}: {e.evalue}"], silent)

        self._remember_large(reply.get("large"), reply)
        count = reply.get("execution_count")
        if isinstance(count, int) and count > 0 and not silent:
            # The session's count (shared by every tab and instance), but never backwards: a cell that changed
            # nothing does not write the state, so the session's count does not move with it.
            self.execution_count = max(count, self.execution_count)
        if not silent:
            for warning in reply.get("warnings") or []:
                self._stream("stderr", f"JupyterLess: {warning}\n")
            self._stream("stdout", reply.get("stdout") or "")
            self._stream("stderr", reply.get("stderr") or "")
            for display in reply.get("displays") or []:
                self.send_response(self.iopub_socket, "display_data",
                                   {"data": display.get("data") or {}, "metadata": display.get("metadata") or {},
                                    "transient": {}})
        if reply.get("status") == "error":
            ename = reply.get("ename") or "Error"
            evalue = reply.get("evalue") or ""
            traceback = reply.get("traceback") or [f"{ename}: {evalue}"]
            return self._error_reply(ename, evalue, traceback, silent)
        result = reply.get("result")
        if result and not silent:
            self.send_response(self.iopub_socket, "execute_result",
                               {"execution_count": self.execution_count, "data": result, "metadata": {}})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def do_shutdown(self, restart):
        # A restart starts a new kernel process, so a new session; the old session's state is cleared here (best
        # effort, briefly: a lost runtime must not hold up the restart).
        if self.used and not self.config_error:
            try:
                self._post("reset", {"session": self.session_id}, RESET_TIMEOUT)
            except Exception as e:  # noqa: BLE001 - shutdown goes on whatever the runtime does
                self.log.warning("JupyterLess: could not reset session %s: %s", self.session_id, e)
        return {"status": "ok", "restart": restart}


if __name__ == "__main__":
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=JupyterLessKernel)
