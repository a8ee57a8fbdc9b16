"""FaaST Python language worker: runs Azure-Functions-style Python functions for the
FaaST host over the gRPC worker channel (protos/worker.proto)."""

__version__ = "0.1.0"
