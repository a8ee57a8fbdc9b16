"""The subset of the `azure.functions` programming model that the FaaST Python worker
supports. Function apps import it unchanged (`import azure.functions as func`).

Mirrors the public API of the azure-functions library for these classes.
"""
from ._blob import InputStream
from ._context import Context, RetryContext, TraceContext
from ._function_app import (AsgiFunctionApp, AuthLevel, BlobSource, Blueprint, DataType, Function,
                            FunctionApp, FunctionRegistrationError, HttpMethod, WsgiFunctionApp)
from ._http import HttpRequest, HttpRequestHeaders, HttpResponse, HttpResponseHeaders
from ._out import Out
from ._queue import QueueMessage
from ._timer import TimerRequest

__all__ = (
    "AsgiFunctionApp",
    "AuthLevel",
    "BlobSource",
    "Blueprint",
    "Context",
    "DataType",
    "Function",
    "FunctionApp",
    "FunctionRegistrationError",
    "HttpMethod",
    "WsgiFunctionApp",
    "HttpRequest",
    "HttpRequestHeaders",
    "HttpResponse",
    "HttpResponseHeaders",
    "InputStream",
    "Out",
    "QueueMessage",
    "RetryContext",
    "TimerRequest",
    "TraceContext",
)

__version__ = "1.0.0+faast"
