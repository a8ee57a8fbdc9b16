# Stage 2: classify the vehicle (model 97 MB + labels) from stage 1's crop; writes the label and the crop for stage 3.
import azure.functions as func

from shared import infer


def main(req: func.HttpRequest, model: func.InputStream, labels: func.InputStream, crop: func.InputStream,
         out: func.Out[bytes]) -> func.HttpResponse:
    weights, names, region = infer.view(model), bytes(infer.view(labels)).decode().splitlines(), infer.view(crop)
    scores, checksum = infer.layer(weights, region, len(names))
    label = names[int(scores.argmax())]
    out.set(label.encode() + b"\n" + bytes(region))
    return func.HttpResponse(f"classify label={label} model={len(weights)} sum={checksum}")
