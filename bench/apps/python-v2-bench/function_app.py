# The Python no-op of bench/apps/python-bench (v1) in the v2 model, for noop_python_v2_p50_ms beside noop_python_p50_ms.
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="Noop", methods=["GET"])
def Noop(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("ok")
