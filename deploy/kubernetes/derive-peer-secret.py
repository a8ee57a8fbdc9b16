#!/usr/bin/python3
"""Writes an app's peer secret, derived from the platform's master key as the platform derives it.

usage: derive-peer-secret.py MASTER_KEY_FILE APP

MASTER_KEY_FILE is the file the platform reads with --master-key-file (base64 of at least 32 bytes), or - for
standard input. APP is the app's name as deployed (lowercase letters, digits and '-'). The secret goes to standard
output as base64 with no newline, ready for `kubectl create secret generic faast-APP-peer --from-file=secret=...`.

The derivation is src/ScaleController/Platform/PlatformKeys.cs, PeerSecretOf(app): HKDF-SHA256 (RFC 5869) of the
master key, no salt, info "faast/peer/APP", 32 bytes, in base64. The platform signs vote queries and checks
ScaleControl calls with it, and gives it to the instances it starts; instances in pods must hold the same value.
The platform has no command or endpoint that prints it (tests/ScaleController.Tests checks this script against
PlatformKeys).
"""
import base64
import binascii
import hashlib
import hmac
import re
import sys

KEY_BYTES = 32


def fail(message):
    sys.stderr.write(f"derive-peer-secret: {message}\n")
    sys.exit(2)


def peer_secret(master: bytes, app: str) -> str:
    # HKDF-Extract without a salt: HMAC keyed with HashLen zero bytes; then one Expand block (32 bytes = SHA-256's size).
    prk = hmac.new(b"\0" * hashlib.sha256().digest_size, master, hashlib.sha256).digest()
    okm = hmac.new(prk, f"faast/peer/{app}".encode("utf-8") + b"\x01", hashlib.sha256).digest()
    return base64.b64encode(okm[:KEY_BYTES]).decode("ascii")


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 0 if len(argv) == 2 else 2
    path, app = argv[1], argv[2]
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,58}[a-z0-9])?", app):
        fail(f'"{app}" is not an app name (1 to 60 lowercase letters, digits and \'-\', starting and ending with a letter or digit)')
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="ascii").read()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read the master key: {e}")
    try:
        master = base64.b64decode("".join(text.split()), validate=True)
    except binascii.Error:
        fail(f"{path}: the master key must be base64 (of at least {KEY_BYTES} random bytes)")
    if len(master) < KEY_BYTES:
        fail(f"{path}: the master key has {len(master)} bytes; it needs at least {KEY_BYTES}")
    sys.stdout.write(peer_secret(master, app))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
