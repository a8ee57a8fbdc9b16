# Stage 1: find the vehicle in the camera frame (model 35 MB + the frame); writes the crop for stage 2.
import azure.functions as func

from shared import infer


def main(req: func.HttpRequest, model: func.InputStream, image: func.InputStream, out: func.Out[bytes]) -> func.HttpResponse:
    weights, frame = infer.view(model), infer.view(image)
    scores, checksum = infer.layer(weights, frame, 64)
    box = int(scores.argmax())
    crop = bytes(frame[box * 1024 : box * 1024 + 16384]) or bytes(frame[:16384])
    out.set(crop)
    return func.HttpResponse(f"detect box={box} model={len(weights)} image={len(frame)} sum={checksum}")
