"""The ASGI application of `nmt-tf serve` (Starlette): TF Serving's REST API over a Servable,
and the attention page at `/`.

  GET  /v1/models/NAME[/versions/N | /labels/L]            version status
  GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signatures (SignatureDefs)
  POST /v1/models/NAME[/versions/N | /labels/L]:predict    rest.py's request and answer; for
       a run served in-process, the beam searches (BEAM_SIGNATURES) also take "parameters":
       {"beam_size", "nbest", "length_penalty"} (an nmt_tf extension, as KServe's)
  GET  /                                                   the page (static/index.html)

Every refusal is TF Serving's `{"error": MESSAGE}`: 400 for a request the model cannot take,
404 for an unknown model, version, label or signature, 413 for a body over the limit; the
server keeps answering after any of them.
"""

import contextlib
import html
import json
import os
import re

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nmt_tf.server import rest
from nmt_tf.server.errors import RequestError
from nmt_tf.server.service import Limits, Service  # pylint: disable=unused-import

STATIC = os.path.join(os.path.dirname(__file__), "static")
_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
                   r"(?P<tail>/metadata|:[A-Za-z]+)?$")


def _error(message, status=400):
  return JSONResponse({"error": str(message)}, status_code=status)


def create_app(servable, limits=None, grpc_address=None):
  """The Starlette application serving `servable` (servable.py) within `limits`; with
  `grpc_address` ("host:port") it serves TF Serving's gRPC API there too (grpc_api.py), from
  the same event loop, batches and models, while the application runs."""
  service = Service(servable, limits)
  limits = service.limits

  def resolve(path):
    """(version, named, tail) of a /v1/models/... path: `named` when the path names the
    version or a label; RequestError 404 when it names nothing served."""
    match = _PATH.match(path)
    if not match:
      raise RequestError(f"Malformed request: /v1/models/{path}", 404)
    version = service.resolve(match["name"], match["version"], match["label"])
    named = match["version"] is not None or match["label"] is not None
    return version, named, match["tail"] or ""

  async def read_body(request):
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.max_body_bytes:
      raise RequestError(_too_large(int(declared), limits), 413)
    body = bytearray()
    async for chunk in request.stream():
      body += chunk
      if len(body) > limits.max_body_bytes:
        raise RequestError(_too_large(len(body), limits), 413)
    return bytes(body)

  async def models(request):
    try:
      version, named, tail = resolve(request.path_params["path"])
      if request.method == "GET":
        if tail == "":
          return JSONResponse(service.status([version] if named else None))
        if tail == "/metadata":
          return JSONResponse(service.metadata(version))
        raise RequestError(f"GET does not take {tail}; POST to :predict.", 404)
      if tail != ":predict":
        raise RequestError(f"This server answers :predict, not {tail or 'a bare POST'} "
                           "(classify and regress are for other models).", 400 if tail
                           else 404)
      body = rest.parse_json(await read_body(request))
      row_format = []

      def read_inputs(dtypes):
        inputs, rows = rest.parse_predict(body, dtypes)
        row_format.append(rows)
        return inputs
      outputs = await service.predict(version, body.get("signature_name"), read_inputs,
                                      body.get("parameters"))
      return Response(rest.dumps(rest.predict_answer(outputs, row_format[0])),
                      media_type="application/json")
    except RequestError as error:
      return _error(error, error.status)
    except ClientDisconnect:
      return Response(status_code=499)

  async def page(request):
    with open(os.path.join(STATIC, "index.html"), encoding="utf-8") as f:
      text = f.read()
    config = {"model": servable.name, "task": servable.task, "version": servable.latest,
              "signatures": sorted(servable.versions[servable.latest]),
              "beam": servable.beam, "variants": servable.variant is not None,
              "target_languages": list(servable.target_languages)}
    return HTMLResponse(text.replace("{{CONFIG}}", html.escape(json.dumps(config))))

  async def not_found(request, exc):
    return _error(f"Not found: {request.url.path}", 404)

  @contextlib.asynccontextmanager
  async def lifespan(app):
    if grpc_address is None:
      yield
      return
    from nmt_tf.server import grpc_api  # pylint: disable=g-import-not-at-top
    server = await grpc_api.start(service, grpc_address)
    try:
      yield
    finally:
      await server.stop(grace=5)

  app = Starlette(routes=[
      Route("/", page),
      Route("/v1/models/{path:path}", models, methods=["GET", "POST"]),
      Mount("/static", StaticFiles(directory=STATIC), name="static"),
  ], exception_handlers={404: not_found}, lifespan=lifespan)
  app.state.service = service
  return app


def _too_large(size, limits):
  return (f"The request body has {size} bytes or more; this server takes at most "
          f"{limits.max_body_bytes} (--max_body_bytes).")
