# Stage 3: read the licence plate (model 5 MB) from stage 2's vehicle; writes the plate.
import azure.functions as func

from shared import infer


def main(req: func.HttpRequest, model: func.InputStream, vehicle: func.InputStream, out: func.Out[bytes]) -> func.HttpResponse:
    weights, region = infer.view(model), infer.view(vehicle)
    scores, checksum = infer.layer(weights, region, 36 * 7)
    plate = "".join("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[int(i)] for i in scores.reshape(7, 36).argmax(axis=1))
    out.set(plate.encode())
    return func.HttpResponse(f"plate {plate} model={len(weights)} sum={checksum} digest={infer.digest(plate)}")
