"""The Python v2 programming model: `FunctionApp`, `Blueprint` and their decorators.

Written from the public documentation of the azure-functions library (FunctionApp,
Blueprint, TriggerApi, BindingApi, SettingsApi): same class, decorator and parameter names
and defaults. Each decorated function yields binding dicts shaped like the entries of a
function.json "bindings" array (`type`, `direction`, `name`, then the binding's own keys in
camelCase), which the worker sends to the host in FunctionMetadataResponse.

Decorators may be stacked in any order; they return the function itself (so it stays
callable in the app's own tests) after recording what they add. The complete function is
checked when the app is indexed (`get_functions()`), because only then are all decorators
applied. Errors name the function and the decorator.
"""
from __future__ import annotations

import datetime
import inspect
import json
import re
from enum import Enum
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union


class AuthLevel(str, Enum):
    """An HTTP trigger's authorization level (function.json's authLevel)."""
    FUNCTION = "function"
    ANONYMOUS = "anonymous"
    ADMIN = "admin"

    def __str__(self) -> str:
        return self.name


class DataType(Enum):
    """How the host presents a binding's data (function.json's dataType)."""
    UNDEFINED = 0
    STRING = 1
    BINARY = 2
    STREAM = 3

    def __str__(self) -> str:
        return self.name


class HttpMethod(str, Enum):
    GET = "GET"
    POST = "POST"
    DELETE = "DELETE"
    HEAD = "HEAD"
    PATCH = "PATCH"
    PUT = "PUT"
    OPTIONS = "OPTIONS"

    def __str__(self) -> str:
        return self.name


class BlobSource(str, Enum):
    """Where a blob trigger learns of new blobs (function.json's source)."""
    EVENT_GRID = "EventGrid"
    LOGS_AND_CONTAINER_SCAN = "LogsAndContainerScan"

    def __str__(self) -> str:
        return self.value


class FunctionRegistrationError(ValueError):
    """A decorator was misused; the message names the function and the decorator."""


# A required decorator argument that was not passed. The decorators take their required
# arguments with this default (instead of no default) so that a missing one is reported
# with the function's name, which is only known when the decorator is applied.
class _Required:
    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Any = _Required()

_BUILDER_ATTR = "_faast_function_builder"


def _camel(key: str) -> str:
    """snake_case -> camelCase, as the azure-functions library names binding keys."""
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _enum_member(value: Any, enum: type, what: str) -> Any:
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        for member in enum:  # by name (as the library parses) or by value
            if value.upper() == member.name or value == member.value or (
                    isinstance(member.value, str) and value.lower() == member.value.lower()):
                return member
    names = ", ".join(m.name for m in enum)
    raise ValueError(f"{what} {value!r} is not one of {names}")


class Function:
    """A registered function: its name, the user's Python function and its bindings.
    Method names follow the azure-functions library's Function."""

    def __init__(self, name: str, func: Callable[..., Any], bindings: List[Dict[str, Any]],
                 retry: Optional[Dict[str, Any]], http_type: Optional[str]) -> None:
        self._name = name
        self._func = func
        self._bindings = bindings
        self._retry = retry
        self._http_type = http_type

    def get_function_name(self) -> str:
        return self._name

    def get_user_function(self) -> Callable[..., Any]:
        return self._func

    def get_bindings_dict(self) -> Dict[str, Any]:
        return {"bindings": [dict(b) for b in self._bindings]}

    def get_raw_bindings(self) -> List[str]:
        return [json.dumps(b) for b in self._bindings]

    def get_trigger(self) -> Optional[Dict[str, Any]]:
        return next((dict(b) for b in self._bindings if b["type"].endswith("Trigger")), None)

    def get_function_json(self) -> str:
        return json.dumps(self.get_bindings_dict())

    def get_retry(self) -> Optional[Dict[str, Any]]:
        """The @retry settings ({"strategy", "maxRetryCount", ...} as function.json's
        "retry" object), or None."""
        return None if self._retry is None else dict(self._retry)

    @property
    def http_type(self) -> Optional[str]:
        return self._http_type

    def __repr__(self) -> str:
        return f"<azure.functions.Function {self._name!r}>"


class _Binding:
    __slots__ = ("data", "decorator", "is_trigger")

    def __init__(self, data: Dict[str, Any], decorator: str, is_trigger: bool) -> None:
        self.data = data
        self.decorator = decorator
        self.is_trigger = is_trigger


class _FunctionBuilder:
    """What the decorators have recorded for one Python function."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.name: Optional[str] = None
        self.bindings: List[_Binding] = []
        self.retry: Optional[Dict[str, Any]] = None
        self.http_type: Optional[str] = None
        self.owner: Optional["_DecoratorApi"] = None

    @property
    def display_name(self) -> str:
        return self.name or getattr(self.func, "__name__", repr(self.func))

    def where(self) -> str:
        code = getattr(self.func, "__code__", None)
        if code is None:
            return ""
        return f" (defined at {code.co_filename}:{code.co_firstlineno})"


_PY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Azure's rule for function names.
_FUNCTION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,127}$")


class _DecoratorApi:
    """The decorators shared by FunctionApp and Blueprint."""

    _owner_kind = "app"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._function_builders: List[_FunctionBuilder] = []

    # ---- machinery -----------------------------------------------------------------

    def _builder(self, func: Any, decorator: str) -> _FunctionBuilder:
        if not callable(func):
            raise FunctionRegistrationError(
                f"@{self._owner_kind}.{decorator} decorates a function, not "
                f"{type(func).__name__} {func!r}")
        builder = getattr(func, _BUILDER_ATTR, None)
        if builder is None:
            builder = _FunctionBuilder(func)
            try:
                setattr(func, _BUILDER_ATTR, builder)
            except (AttributeError, TypeError) as exc:
                raise FunctionRegistrationError(
                    f"@{self._owner_kind}.{decorator}: cannot register {func!r}: {exc}") from exc
        if builder.owner is None:
            builder.owner = self
            self._function_builders.append(builder)
        elif builder.owner is not self:
            raise FunctionRegistrationError(
                f"function '{builder.display_name}': @{self._owner_kind}.{decorator}: the "
                f"function is already decorated by another FunctionApp or Blueprint; all of "
                f"a function's decorators must come from one{builder.where()}")
        return builder

    def _error(self, builder: _FunctionBuilder, decorator: str, text: str) -> FunctionRegistrationError:
        return FunctionRegistrationError(
            f"function '{builder.display_name}': @{self._owner_kind}.{decorator}: {text}"
            f"{builder.where()}")

    def _decorator(self, decorator: str, required: Dict[str, Any],
                   apply: Callable[[_FunctionBuilder], None]) -> Callable[[Any], Any]:
        def wrap(func: Any) -> Any:
            builder = self._builder(func, decorator)
            for arg, value in required.items():
                if value is _REQUIRED or value is None:
                    raise self._error(builder, decorator, f"missing required argument '{arg}'")
            try:
                apply(builder)
            except FunctionRegistrationError:
                raise
            except (ValueError, TypeError) as exc:
                raise self._error(builder, decorator, str(exc)) from exc
            return func
        return wrap

    def _binding(self, decorator: str, binding_type: str, direction: str, is_trigger: bool,
                 arg_name: Any, required: Dict[str, Any], keys: Dict[str, Any],
                 data_type: Any, extra: Optional[Dict[str, Any]]) -> Callable[[Any], Any]:
        def apply(builder: _FunctionBuilder) -> None:
            if not isinstance(binding_type, str) or not binding_type:
                raise ValueError(f"type must be a non-empty string, not {binding_type!r}")
            if not isinstance(arg_name, str) or not (
                    arg_name == "$return" or _PY_NAME.match(arg_name)):
                raise ValueError(f"arg_name {arg_name!r} must be a Python identifier "
                                 f"(a parameter of the function) or '$return'")
            data: Dict[str, Any] = {"type": binding_type, "direction": direction,
                                    "name": arg_name}
            for key, value in keys.items():
                if isinstance(value, _EnumArg):
                    value = value.resolve()
                if value is not None:
                    data[key] = value
            if data_type is not None:
                member = _enum_member(data_type, DataType, "data_type")
                if member is not DataType.UNDEFINED:  # function.json has no "undefined"
                    data["dataType"] = member.name.lower()
            for key, value in (extra or {}).items():
                if value is not None:
                    data[_camel(key)] = value
            if is_trigger:
                existing = next((b for b in builder.bindings if b.is_trigger), None)
                if existing is not None:
                    raise ValueError(
                        f"the function already has a trigger (@{self._owner_kind}."
                        f"{existing.decorator}); a function has exactly one trigger")
            for other in builder.bindings:
                if other.data["name"].lower() == arg_name.lower():
                    raise ValueError(
                        f"binding name '{arg_name}' is already used by @{self._owner_kind}."
                        f"{other.decorator}")
            builder.bindings.append(_Binding(data, decorator, is_trigger))
        return self._decorator(decorator, {"arg_name": arg_name, **required}, apply)

    # ---- settings ------------------------------------------------------------------

    def function_name(self, name: str = _REQUIRED,
                      setting_extra_fields: Optional[Dict[str, Any]] = None
                      ) -> Callable[[Any], Any]:
        """The function's name (default: the Python function's name)."""
        def apply(builder: _FunctionBuilder) -> None:
            if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
                raise ValueError(f"name {name!r} must start with a letter and hold only "
                                 f"letters, digits, '_' and '-' (at most 128 characters)")
            if builder.name is not None:
                raise ValueError(f"the function is already named '{builder.name}'")
            builder.name = name
        return self._decorator("function_name", {"name": name}, apply)

    def http_type(self, http_type: str = _REQUIRED,
                  setting_extra_fields: Optional[Dict[str, Any]] = None
                  ) -> Callable[[Any], Any]:
        """The function's HTTP type ("function" for a plain HTTP function; "asgi"/"wsgi"
        are what AsgiFunctionApp/WsgiFunctionApp set, which FaaST does not support)."""
        def apply(builder: _FunctionBuilder) -> None:
            if not isinstance(http_type, str):
                raise ValueError(f"http_type must be a string, not {http_type!r}")
            builder.http_type = http_type
        return self._decorator("http_type", {"http_type": http_type}, apply)

    def retry(self, strategy: str = _REQUIRED, max_retry_count: Union[str, int] = _REQUIRED,
              delay_interval: Optional[str] = None, minimum_interval: Optional[str] = None,
              maximum_interval: Optional[str] = None,
              setting_extra_fields: Optional[Dict[str, Any]] = None) -> Callable[[Any], Any]:
        """The function's retry policy: strategy "fixed_delay" (with delay_interval) or
        "exponential_backoff" (with minimum_interval and maximum_interval); intervals are
        TimeSpans "[d.]hh:mm:ss[.fff]"; max_retry_count -1 retries forever."""
        def apply(builder: _FunctionBuilder) -> None:
            if builder.retry is not None:
                raise ValueError("the function already has a retry policy")
            builder.retry = parse_retry(strategy, max_retry_count, delay_interval,
                                        minimum_interval, maximum_interval)
        return self._decorator("retry", {"strategy": strategy,
                                         "max_retry_count": max_retry_count}, apply)

    # ---- triggers ------------------------------------------------------------------

    def route(self, route: Optional[str] = None, trigger_arg_name: str = "req",
              binding_arg_name: str = "$return",
              methods: Optional[Union[Iterable[str], Iterable[HttpMethod]]] = None,
              auth_level: Optional[Union[AuthLevel, str]] = None,
              trigger_extra_fields: Optional[Dict[str, Any]] = None,
              binding_extra_fields: Optional[Dict[str, Any]] = None) -> Callable[[Any], Any]:
        """An HTTP trigger (route defaults to the function name, auth_level to the app's
        http_auth_level) and its HTTP output (binding_arg_name, "$return" by default)."""
        level = None if auth_level is None else _EnumArg(auth_level, AuthLevel, "auth_level")
        method_list: Optional[List[str]] = None
        method_error: Optional[str] = None
        if methods is not None:
            if isinstance(methods, (str, HttpMethod)):
                methods = [methods]  # type: ignore[list-item]
            try:
                method_list = [_enum_member(m, HttpMethod, "method").name for m in methods]
            except (ValueError, TypeError) as exc:
                method_error = str(exc)
        trigger = self._binding(
            "route", "httpTrigger", "in", True, trigger_arg_name, {},
            {"route": route, "methods": method_list, "authLevel": level}, None,
            trigger_extra_fields)
        output = self._binding("route", "http", "out", False, binding_arg_name, {}, {}, None,
                               binding_extra_fields)

        def wrap(func: Any) -> Any:
            builder = self._builder(func, "route")
            if method_error is not None:
                raise self._error(builder, "route", method_error)
            if route is not None and not isinstance(route, str):
                raise self._error(builder, "route", f"route must be a string, not {route!r}")
            # Output first: the build reverses the recorded order (decorators apply
            # bottom-up), so the trigger comes out first, as written in function.json.
            return trigger(output(func))
        return wrap

    def blob_trigger(self, arg_name: str = _REQUIRED, path: str = _REQUIRED,
                     connection: str = _REQUIRED,
                     source: Optional[Union[BlobSource, str]] = None,
                     data_type: Optional[Union[DataType, str]] = None,
                     **kwargs: Any) -> Callable[[Any], Any]:
        src = None if source is None else _EnumArg(source, BlobSource, "source")
        return self._binding("blob_trigger", "blobTrigger", "in", True, arg_name,
                             {"path": path, "connection": connection},
                             {"path": path, "connection": connection, "source": src},
                             data_type, kwargs)

    def queue_trigger(self, arg_name: str = _REQUIRED, queue_name: str = _REQUIRED,
                      connection: str = _REQUIRED,
                      data_type: Optional[Union[DataType, str]] = None,
                      **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("queue_trigger", "queueTrigger", "in", True, arg_name,
                             {"queue_name": queue_name, "connection": connection},
                             {"queueName": queue_name, "connection": connection},
                             data_type, kwargs)

    def schedule(self, arg_name: str = _REQUIRED, schedule: str = _REQUIRED,
                 run_on_startup: Optional[bool] = None, use_monitor: Optional[bool] = None,
                 data_type: Optional[Union[DataType, str]] = None,
                 **kwargs: Any) -> Callable[[Any], Any]:
        """A timer trigger: schedule is an NCRONTAB expression (six fields) or a TimeSpan."""
        return self._timer("schedule", arg_name, schedule, run_on_startup, use_monitor,
                           data_type, kwargs)

    def timer_trigger(self, arg_name: str = _REQUIRED, schedule: str = _REQUIRED,
                      run_on_startup: Optional[bool] = None, use_monitor: Optional[bool] = None,
                      data_type: Optional[Union[DataType, str]] = None,
                      **kwargs: Any) -> Callable[[Any], Any]:
        """The same as schedule()."""
        return self._timer("timer_trigger", arg_name, schedule, run_on_startup, use_monitor,
                           data_type, kwargs)

    def _timer(self, decorator: str, arg_name: Any, schedule: Any, run_on_startup: Any,
               use_monitor: Any, data_type: Any, kwargs: Dict[str, Any]) -> Callable[[Any], Any]:
        inner = self._binding(decorator, "timerTrigger", "in", True, arg_name,
                              {"schedule": schedule},
                              {"schedule": schedule, "runOnStartup": run_on_startup,
                               "useMonitor": use_monitor}, data_type, kwargs)

        def wrap(func: Any) -> Any:
            builder = self._builder(func, decorator)
            if schedule is not _REQUIRED and schedule is not None and (
                    not isinstance(schedule, str) or not schedule.strip()):
                raise self._error(builder, decorator,
                                  f"schedule must be a non-empty string, not {schedule!r}")
            for arg, value in (("run_on_startup", run_on_startup), ("use_monitor", use_monitor)):
                if value is not None and not isinstance(value, bool):
                    raise self._error(builder, decorator,
                                      f"{arg} must be True or False, not {value!r}")
            return inner(func)
        return wrap

    def generic_trigger(self, arg_name: str = _REQUIRED, type: str = _REQUIRED,
                        data_type: Optional[Union[DataType, str]] = None,
                        **kwargs: Any) -> Callable[[Any], Any]:
        """A trigger of any type; kwargs become its keys (camelCased)."""
        return self._binding("generic_trigger", type, "in", True, arg_name, {"type": type},
                             {}, data_type, kwargs)

    # ---- input and output bindings ---------------------------------------------------

    def blob_input(self, arg_name: str = _REQUIRED, path: str = _REQUIRED,
                   connection: str = _REQUIRED,
                   data_type: Optional[Union[DataType, str]] = None,
                   **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("blob_input", "blob", "in", False, arg_name,
                             {"path": path, "connection": connection},
                             {"path": path, "connection": connection}, data_type, kwargs)

    def blob_output(self, arg_name: str = _REQUIRED, path: str = _REQUIRED,
                    connection: str = _REQUIRED,
                    data_type: Optional[Union[DataType, str]] = None,
                    **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("blob_output", "blob", "out", False, arg_name,
                             {"path": path, "connection": connection},
                             {"path": path, "connection": connection}, data_type, kwargs)

    def queue_output(self, arg_name: str = _REQUIRED, queue_name: str = _REQUIRED,
                     connection: str = _REQUIRED,
                     data_type: Optional[Union[DataType, str]] = None,
                     **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("queue_output", "queue", "out", False, arg_name,
                             {"queue_name": queue_name, "connection": connection},
                             {"queueName": queue_name, "connection": connection},
                             data_type, kwargs)

    def table_input(self, arg_name: str = _REQUIRED, connection: str = _REQUIRED,
                    table_name: str = _REQUIRED, row_key: Optional[str] = None,
                    partition_key: Optional[str] = None, take: Optional[int] = None,
                    filter: Optional[str] = None,
                    data_type: Optional[Union[DataType, str]] = None) -> Callable[[Any], Any]:
        inner = self._binding("table_input", "table", "in", False, arg_name,
                              {"connection": connection, "table_name": table_name},
                              {"tableName": table_name, "connection": connection,
                               "rowKey": row_key, "partitionKey": partition_key,
                               "take": take, "filter": filter}, data_type, None)

        def wrap(func: Any) -> Any:
            builder = self._builder(func, "table_input")
            if take is not None and (isinstance(take, bool) or not isinstance(take, int)
                                     or take < 1):
                raise self._error(builder, "table_input",
                                  f"take must be a positive integer, not {take!r}")
            if row_key is not None and (take is not None or filter is not None):
                raise self._error(builder, "table_input",
                                  "row_key cannot be combined with take or filter")
            return inner(func)
        return wrap

    def table_output(self, arg_name: str = _REQUIRED, connection: str = _REQUIRED,
                     table_name: str = _REQUIRED, row_key: Optional[str] = None,
                     partition_key: Optional[str] = None,
                     data_type: Optional[Union[DataType, str]] = None) -> Callable[[Any], Any]:
        return self._binding("table_output", "table", "out", False, arg_name,
                             {"connection": connection, "table_name": table_name},
                             {"tableName": table_name, "connection": connection,
                              "rowKey": row_key, "partitionKey": partition_key},
                             data_type, None)

    def generic_input_binding(self, arg_name: str = _REQUIRED, type: str = _REQUIRED,
                              data_type: Optional[Union[DataType, str]] = None,
                              **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("generic_input_binding", type, "in", False, arg_name,
                             {"type": type}, {}, data_type, kwargs)

    def generic_output_binding(self, arg_name: str = _REQUIRED, type: str = _REQUIRED,
                               data_type: Optional[Union[DataType, str]] = None,
                               **kwargs: Any) -> Callable[[Any], Any]:
        return self._binding("generic_output_binding", type, "out", False, arg_name,
                             {"type": type}, {}, data_type, kwargs)


class _EnumArg:
    """An enum-valued decorator argument (auth_level, source), checked when the decorator
    is applied so that a bad value is reported with the function's name."""

    def __init__(self, value: Any, enum: type, what: str) -> None:
        self.value, self.enum, self.what = value, enum, what

    def resolve(self) -> str:
        return _enum_member(self.value, self.enum, self.what).value


class Blueprint(_DecoratorApi):
    """Functions defined apart from the app (e.g. in another module), added to it with
    FunctionApp.register_functions(bp)."""

    _owner_kind = "bp"


class FunctionApp(_DecoratorApi):
    """The app's functions. `http_auth_level` is the auth level of HTTP functions whose
    route() gives none (AuthLevel.FUNCTION by default, as in Azure)."""

    def __init__(self, http_auth_level: Union[AuthLevel, str] = AuthLevel.FUNCTION,
                 *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._auth_level = _enum_member(http_auth_level, AuthLevel, "http_auth_level")
        self._blueprints: List[Blueprint] = []

    @property
    def auth_level(self) -> AuthLevel:
        return self._auth_level

    def register_functions(self, function_container: _DecoratorApi) -> None:
        """Add a Blueprint's functions (those it has now and any it gets later)."""
        if function_container is self:
            raise FunctionRegistrationError("register_functions: an app cannot register itself")
        if not isinstance(function_container, Blueprint):
            raise FunctionRegistrationError(
                f"register_functions takes a Blueprint, not {type(function_container).__name__}")
        if any(bp is function_container for bp in self._blueprints):
            raise FunctionRegistrationError(
                "register_functions: this Blueprint is already registered with this app")
        self._blueprints.append(function_container)

    register_blueprint = register_functions

    def get_functions(self) -> List[Function]:
        """Every function of the app and its blueprints, checked; raises
        FunctionRegistrationError naming the function and the decorator."""
        functions: List[Function] = []
        seen: Dict[str, _FunctionBuilder] = {}
        builders: List[Tuple[_DecoratorApi, _FunctionBuilder]] = [
            (self, b) for b in self._function_builders]
        for bp in self._blueprints:
            builders.extend((bp, b) for b in bp._function_builders)
        for api, builder in builders:
            fn = _build(api, builder, self._auth_level)
            key = fn.get_function_name().lower()  # the host's function names ignore case
            if key in seen:
                raise FunctionRegistrationError(
                    f"function '{fn.get_function_name()}': two functions have this name "
                    f"(the Python functions {_qualname(seen[key])}{seen[key].where()} and "
                    f"{_qualname(builder)}{builder.where()}); give one another name with "
                    f"@app.function_name")
            seen[key] = builder
            functions.append(fn)
        return functions


def _qualname(builder: _FunctionBuilder) -> str:
    return f"'{getattr(builder.func, '__qualname__', builder.display_name)}'"


def _parameters(func: Callable[..., Any]) -> Optional[List[str]]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _build(api: _DecoratorApi, builder: _FunctionBuilder, auth_level: AuthLevel) -> Function:
    kind = api._owner_kind
    trigger = next((b for b in builder.bindings if b.is_trigger), None)
    if trigger is None:
        decorators = ", ".join(sorted({f"@{kind}.{b.decorator}" for b in builder.bindings})) \
            or "no binding decorators"
        raise FunctionRegistrationError(
            f"function '{builder.display_name}': has no trigger (it has {decorators}); a "
            f"function needs exactly one trigger decorator such as @{kind}.route, "
            f"@{kind}.blob_trigger, @{kind}.queue_trigger or @{kind}.schedule{builder.where()}")
    params = _parameters(builder.func)
    if params is not None:
        for b in builder.bindings:
            name = b.data["name"]
            if name != "$return" and name not in params:
                listed = ", ".join(params) or "none"
                raise FunctionRegistrationError(
                    f"function '{builder.display_name}': @{kind}.{b.decorator}: binding "
                    f"'{name}' is not a parameter of the function (its parameters: "
                    f"{listed}){builder.where()}")
    name = builder.display_name
    bindings: List[Dict[str, Any]] = []
    for b in builder.bindings:
        data = dict(b.data)
        if data["type"] == "httpTrigger":
            if data.get("route") is None:
                data["route"] = name
            data.setdefault("authLevel", auth_level.value)
        bindings.append(data)
    # Bindings in decorator order, top to bottom as written (decorators apply bottom-up).
    bindings.reverse()
    return Function(name, builder.func, bindings, builder.retry, builder.http_type)


_TIMESPAN = re.compile(r"^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,7}))?$")


def parse_timespan(text: Any, what: str) -> datetime.timedelta:
    """A .NET TimeSpan string "[d.]hh:mm:ss[.fffffff]" (what function.json's retry
    intervals hold) as a timedelta."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a TimeSpan string like '00:00:10', not {text!r}")
    m = _TIMESPAN.match(text.strip())
    if m is None:
        raise ValueError(f"{what} {text!r} is not a TimeSpan ('[d.]hh:mm:ss[.fff]')")
    days, hours, minutes, seconds, frac = m.groups()
    if int(hours) > 23 or int(minutes) > 59 or int(seconds) > 59:
        raise ValueError(f"{what} {text!r} is not a TimeSpan (hours < 24, minutes and "
                         f"seconds < 60)")
    micros = int((frac or "0").ljust(7, "0")[:6])
    return datetime.timedelta(days=int(days or 0), hours=int(hours), minutes=int(minutes),
                              seconds=int(seconds), microseconds=micros)


def parse_retry(strategy: Any, max_retry_count: Any, delay_interval: Any,
                minimum_interval: Any, maximum_interval: Any) -> Dict[str, Any]:
    """A retry policy as function.json's "retry" object: {"strategy": "fixedDelay" |
    "exponentialBackoff", "maxRetryCount": int, "delayInterval" | "minimumInterval" +
    "maximumInterval": "hh:mm:ss"}."""
    key = str(strategy).replace("_", "").lower() if isinstance(strategy, str) else None
    if key not in ("fixeddelay", "exponentialbackoff"):
        raise ValueError(f"strategy {strategy!r} must be 'fixed_delay' or 'exponential_backoff'")
    try:
        if isinstance(max_retry_count, bool):
            raise ValueError
        count = int(max_retry_count)
    except (TypeError, ValueError):
        raise ValueError(f"max_retry_count {max_retry_count!r} must be an integer "
                         f"(-1 retries forever)") from None
    if count < -1:
        raise ValueError(f"max_retry_count {count} must be -1 (forever) or more")
    policy: Dict[str, Any] = {"maxRetryCount": count}
    if key == "fixeddelay":
        if delay_interval is None:
            raise ValueError("strategy 'fixed_delay' needs delay_interval")
        parse_timespan(delay_interval, "delay_interval")
        policy.update(strategy="fixedDelay", delayInterval=delay_interval.strip())
    else:
        if minimum_interval is None or maximum_interval is None:
            raise ValueError("strategy 'exponential_backoff' needs minimum_interval and "
                             "maximum_interval")
        low = parse_timespan(minimum_interval, "minimum_interval")
        high = parse_timespan(maximum_interval, "maximum_interval")
        if low > high:
            raise ValueError(f"minimum_interval {minimum_interval!r} is longer than "
                             f"maximum_interval {maximum_interval!r}")
        policy.update(strategy="exponentialBackoff", minimumInterval=minimum_interval.strip(),
                      maximumInterval=maximum_interval.strip())
    return {"strategy": policy.pop("strategy"), **policy}


class _UnsupportedHttpApp:
    kind = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"func.{self.kind} is not supported by FaaST: serve the app's routes with "
            f"func.FunctionApp and @app.route functions instead")


class AsgiFunctionApp(_UnsupportedHttpApp):
    """Not supported (an ASGI app behind one catch-all HTTP function): constructing one
    raises NotImplementedError saying so, instead of an AttributeError at import."""
    kind = "AsgiFunctionApp"


class WsgiFunctionApp(_UnsupportedHttpApp):
    """Not supported; see AsgiFunctionApp."""
    kind = "WsgiFunctionApp"
