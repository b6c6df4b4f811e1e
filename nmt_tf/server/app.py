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

import collections
import dataclasses
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
from nmt_tf.server.batching import Batcher

STATIC = os.path.join(os.path.dirname(__file__), "static")
_PATH = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
                   r"(?P<tail>/metadata|:[A-Za-z]+)?$")


@dataclasses.dataclass
class Limits:
  """What one request may ask (each refused with a 400 or 413 naming its flag).

  Attributes:
    max_batch_size: rows of one request, and of one batch of grouped requests.
    max_text_chars: characters of one text input.
    max_beam_size: the widest beam a request's "parameters" may ask.
    max_variants: beam searches with other settings kept traced at once (the oldest goes).
    max_body_bytes: bytes of one request body.
    batch_timeout_micros: how long a batch waits for more requests after its first.
  """

  max_batch_size: int = 64
  max_text_chars: int = 2000
  max_body_bytes: int = 8 << 20
  batch_timeout_micros: int = 2000
  max_beam_size: int = 16
  max_variants: int = 8


def _error(message, status=400):
  return JSONResponse({"error": str(message)}, status_code=status)


def create_app(servable, limits=None):
  """The Starlette application serving `servable` (servable.py) within `limits`."""
  limits = limits or Limits()
  batcher = Batcher(limits.max_batch_size, limits.batch_timeout_micros / 1e6)
  variants = collections.OrderedDict()  # (name, beam, nbest, length penalty) -> Signature

  def resolve(path):
    """(version, named, tail) of a /v1/models/... path: `named` when the path names the
    version or a label; RestError 404 when it names nothing served."""
    match = _PATH.match(path)
    if not match:
      raise rest.RestError(f"Malformed request: /v1/models/{path}", 404)
    if match["name"] != servable.name:
      raise rest.RestError(f"Servable not found for request: Latest({match['name']})", 404)
    version = servable.latest
    if match["version"] is not None:
      if not match["version"].isdigit() or int(match["version"]) not in servable.versions:
        raise rest.RestError(f"Servable not found for request: Specific({servable.name}, "
                             f"{match['version']})", 404)
      version = int(match["version"])
    elif match["label"] is not None:
      if match["label"] not in servable.labels:
        raise rest.RestError(f"Unrecognized servable version label: {match['label']}", 404)
      version = servable.labels[match["label"]]
    named = match["version"] is not None or match["label"] is not None
    return version, named, match["tail"] or ""

  async def read_body(request):
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.max_body_bytes:
      raise rest.RestError(_too_large(int(declared), limits), 413)
    body = bytearray()
    async for chunk in request.stream():
      body += chunk
      if len(body) > limits.max_body_bytes:
        raise rest.RestError(_too_large(len(body), limits), 413)
    return bytes(body)

  async def models(request):
    try:
      version, named, tail = resolve(request.path_params["path"])
      if request.method == "GET":
        if tail == "":
          return JSONResponse(rest.version_status([version] if named else servable.versions))
        if tail == "/metadata":
          return JSONResponse(_metadata(servable, version))
        raise rest.RestError(f"GET does not take {tail}; POST to :predict.", 404)
      if tail != ":predict":
        raise rest.RestError(f"This server answers :predict, not {tail or 'a bare POST'} "
                             "(classify and regress are for other models).", 400 if tail
                             else 404)
      body = await read_body(request)
      answer = await predict(version, rest.parse_json(body))
      return Response(rest.dumps(answer), media_type="application/json")
    except rest.RestError as error:
      return _error(error, error.status)
    except ClientDisconnect:
      return Response(status_code=499)

  async def predict(version, request):
    signatures = servable.versions[version]
    name = request.get("signature_name") or "serving_default"
    if not isinstance(name, str) or name not in signatures:
      raise rest.RestError(f"Serving signature name: \"{name}\" not found in signature def; "
                           f"this model has {sorted(signatures)}.", 404)
    signature, batch_key = signatures[name], (version, name)
    if "parameters" in request:
      settings = search_settings(request["parameters"], name)
      if settings != tuple(servable.beam.get(k) for k in SETTINGS):
        signature, batch_key = await variant(name, settings), (version, name, settings)
    inputs, row_format = rest.parse_predict(request, signature.input_dtypes())
    rows = len(next(iter(inputs.values())))
    if rows > limits.max_batch_size:
      raise rest.RestError(f"The request has {rows} rows; this server takes at most "
                           f"{limits.max_batch_size} in one request (--max_batch_size).")
    for input_name, values in inputs.items():
      if input_name != "image_bytes":
        _check_lengths(input_name, values, limits.max_text_chars)
    if "target_lang" in inputs:
      _check_languages(inputs["target_lang"], servable.target_languages)
    if rows == 0:  # the signature's empty outputs, without a batch
      return rest.predict_answer(signature(inputs), row_format)
    try:
      outputs = await batcher.run(batch_key, signature, inputs)
    except Exception as error:  # pylint: disable=broad-exception-caught
      raise rest.RestError(_first_line(error)) from error
    return rest.predict_answer(outputs, row_format)

  def search_settings(parameters, name):
    """(beam_size, nbest, length_penalty) of a request's "parameters"; RestError unless the
    served model can search with them."""
    if servable.variant is None:
      raise rest.RestError("This server serves an export, whose beam search is fixed at export "
                           f"({_settings_text(servable.beam)}); serve the run (--run_dir) to "
                           "choose the beam per request.")
    if name not in BEAM_SIGNATURES:
      raise rest.RestError(f"\"parameters\" apply to the {', '.join(BEAM_SIGNATURES)} "
                           f"signatures, not {name}.")
    if not isinstance(parameters, dict) or set(parameters) - set(SETTINGS):
      raise rest.RestError(f"\"parameters\" must be an object with some of {list(SETTINGS)}.")
    merged = {**servable.beam, **parameters}
    beam, nbest, alpha = (merged[k] for k in SETTINGS)
    if not (_is_int(beam) and 1 <= beam <= limits.max_beam_size):
      raise rest.RestError(f"beam_size={beam!r}: expected an integer from 1 to "
                           f"{limits.max_beam_size}.")
    if not (_is_int(nbest) and 1 <= nbest <= beam):
      raise rest.RestError(f"nbest={nbest!r}: expected an integer from 1 to beam_size={beam}.")
    if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
            and 0 <= alpha <= 5):
      raise rest.RestError(f"length_penalty={alpha!r}: expected a number from 0 to 5.")
    return beam, nbest, float(alpha)

  async def variant(name, settings):
    """The beam search Signature `name` with `settings`, traced in the model's thread on first
    use."""
    key = (name,) + settings
    if key not in variants:
      if len(variants) >= limits.max_variants:
        variants.popitem(last=False)
      variants[key] = await batcher.in_model_thread(servable.variant, *settings, name)
    variants.move_to_end(key)
    return variants[key]

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

  app = Starlette(routes=[
      Route("/", page),
      Route("/v1/models/{path:path}", models, methods=["GET", "POST"]),
      Mount("/static", StaticFiles(directory=STATIC), name="static"),
  ], exception_handlers={404: not_found})
  app.state.batcher = batcher
  return app


SETTINGS = ("beam_size", "nbest", "length_penalty")
# The signatures whose beam a request's "parameters" may set.
BEAM_SIGNATURES = ("beam_search", "beam_search_prefix", "beam_search_constrained")


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _settings_text(beam):
  return ", ".join(f"{k} {beam[k]}" for k in SETTINGS if k in beam) or "unknown settings"


def _check_lengths(key, values, max_chars):
  """RestError naming --max_text_chars when a text of `values` (bytes) is longer."""
  for i, value in enumerate(values):
    if isinstance(value, bytes) and len(value) > max_chars:  # bytes >= characters
      chars = len(value.decode("utf-8", "replace"))
      if chars > max_chars:
        raise rest.RestError(f"The input {key}[{i}] has {chars} characters; this server "
                             f"takes at most {max_chars} (--max_text_chars).")


def _check_languages(values, languages):
  """RestError unless every target_lang of `values` (bytes) is one of `languages` (a model
  with target-language tags; the model's own check runs when the server does not know
  them)."""
  if not languages:
    return
  for i, value in enumerate(values):
    language = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if language not in languages:
      raise rest.RestError(f"target_lang[{i}] is {language!r}, a language this model was not "
                           f"trained for; give one of {', '.join(languages)}.")


def _too_large(size, limits):
  return (f"The request body has {size} bytes or more; this server takes at most "
          f"{limits.max_body_bytes} (--max_body_bytes).")


def _first_line(error):
  message = getattr(error, "message", None) or str(error) or type(error).__name__
  return " ".join(message.strip().splitlines()[:1])[:500]


def _metadata(servable, version):
  return {"model_spec": {"name": servable.name, "signature_name": "", "version": str(version)},
          "metadata": {"signature_def": {
              "signature_def": {name: s.signature_def()
                                for name, s in servable.versions[version].items()}}}}
