# Namespace-style package: other `azure.*` distributions (e.g. an app's vendored
# azure-storage-blob) must still be importable beside the worker's azure.functions.
# The worker re-runs extend_path after adding the app's directories to sys.path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)  # type: ignore[name-defined]
