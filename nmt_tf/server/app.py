"""The ASGI application of `nmt-tf serve` (Starlette): TF Serving's REST API over a Servable,
and the attention page at `/`.

  GET  /v1/models/NAME[/versions/N | /labels/L]            version status
  GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   signatures (SignatureDefs)
  POST /v1/models/NAME[/versions/N | /labels/L]:predict    rest.py's request and answer; for
       a run served in-process, the beam searches (BEAM_SIGNATURES) also take "parameters":
       {"beam_size", "nbest", "length_penalty"} (an nmt_tf extension, as KServe's)
  GET  /monitoring/prometheus/metrics                      request counts and latencies,
       batch sizes and queue waits in Prometheus' text format (metrics.py)
  GET  /                                                   the page (static/index.html)

Every refusal is TF Serving's `{"error": MESSAGE}`: 400 for a request the model cannot take,
404 for an unknown model, version, label or signature, 413 for a body over the limit; the
server keeps answering after any of them.
"""

import asyncio
import contextlib
import html
import json
import os
import re
import time

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nmt_tf.server import rest
from nmt_tf.server.errors import first_line, RequestError
from nmt_tf.server.service import Limits, Service  # pylint: disable=unused-import

STATIC = os.path.join(os.path.dirname(__file__), "static")
_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
                   r"(?P<tail>/metadata|:[A-Za-z]+)?$")


def _error(message, status=400):
  return JSONResponse({"error": str(message)}, status_code=status)


def create_app(servables, limits=None, grpc_address=None, poll_seconds=None, report=None):
  """The Starlette application serving `servables` (a Servable or a list of them, the first
  the page's; servable.py) within `limits`. With `grpc_address` ("host:port") it serves TF
  Serving's gRPC API there too (grpc_api.py), from the same event loop, batches and models;
  with `poll_seconds` it looks for new and removed versions that often (reload.py),
  reporting each change with `report(line)`; gRPC's HandleReloadConfigRequest replaces the
  models."""
  service = Service(servables, limits)
  limits = service.limits

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
    """The answer of a /v1/models/... request, counted in the metrics."""
    start = time.perf_counter()
    match = _PATH.match(request.path_params["path"])
    tail = (match["tail"] or "") if match else ""
    response = await answer(request, match, tail)
    api = ("Predict" if request.method == "POST" else
           "GetModelMetadata" if tail == "/metadata" else "GetModelStatus")
    service.count(match["name"] if match else "", api, "REST", response.status_code,
                  time.perf_counter() - start)
    return response

  async def metrics(request):
    return Response(service.metrics.text(), media_type="text/plain; version=0.0.4")

  async def answer(request, match, tail):
    """The answer of the request whose path matched `match` (_PATH; None: malformed)."""
    try:
      if not match:
        raise RequestError(f"Malformed request: /v1/models/{request.path_params['path']}", 404)
      model = (match["name"], match["version"], match["label"])
      # 404 first for a path naming nothing; a version that failed to load has a status.
      served, version = service.resolve(*model, failed=request.method == "GET")
      if request.method == "GET":
        named = match["version"] is not None or match["label"] is not None
        if tail == "":
          return JSONResponse(service.status(served, [version] if named else None))
        if tail == "/metadata":
          served, version = service.resolve(*model)
          return JSONResponse(service.metadata(served, version))
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
      _, outputs = await service.predict(model, body.get("signature_name"), read_inputs,
                                         body.get("parameters"))
      return Response(rest.dumps(rest.predict_answer(outputs, row_format[0])),
                      media_type="application/json")
    except RequestError as error:
      return _error(error, error.status)
    except ClientDisconnect:
      return Response(status_code=499)

  async def page(request):
    """The page of the first model, or of ?model=NAME."""
    servable = service.models.get(request.query_params.get("model"), service.servable)
    if servable is None or not servable.versions:
      servable = next((s for s in service.models.values() if s.versions), None)
    if servable is None:
      return HTMLResponse("<p>No model has a version to serve yet.</p>", status_code=503)
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
    # pylint: disable=g-import-not-at-top
    from nmt_tf.server.reload import Watcher
    tasks, server = [], None
    watcher = Watcher(service, report or (lambda line: None))
    if poll_seconds:
      tasks.append(asyncio.create_task(_poll(watcher, poll_seconds)))
    if grpc_address is not None:
      from nmt_tf.server import grpc_api
      server = await grpc_api.start(service, grpc_address, watcher)
    try:
      yield
    finally:
      for task in tasks:
        task.cancel()
      if server is not None:
        await server.stop(grace=5)

  app = Starlette(routes=[
      Route("/", page),
      Route("/v1/models/{path:path}", models, methods=["GET", "POST"]),
      Route("/monitoring/prometheus/metrics", metrics),
      Mount("/static", StaticFiles(directory=STATIC), name="static"),
  ], exception_handlers={404: not_found}, lifespan=lifespan)
  app.state.service = service
  return app


async def _poll(watcher, seconds):
  """Every `seconds`, the new and removed versions of the models served from base paths
  (reload.py)."""
  while True:
    await asyncio.sleep(seconds)
    try:
      await watcher.poll()
    except Exception as error:  # pylint: disable=broad-exception-caught
      watcher.report(f"looking for new versions failed: {first_line(error)}")


def _too_large(size, limits):
  return (f"The request body has {size} bytes or more; this server takes at most "
          f"{limits.max_body_bytes} (--max_body_bytes).")
