import time

import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    # A request that holds one of the instance's 4 worker threads for `ms` milliseconds (an I/O wait, as
    # an inference call or a storage read would): utilisation grows with the offered load, CPU barely does,
    # so the 2-core benchmark machine measures the controller rather than its own saturation.
    ms = int(req.route_params["ms"])
    time.sleep(ms / 1000.0)
    return func.HttpResponse("ok")
