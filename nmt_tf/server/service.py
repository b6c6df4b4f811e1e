"""What the server answers, whichever API asks: a Servable's versions resolved from a model
name, version or label; its signatures called on numpy inputs through one Batcher, within the
server's Limits; version status and SignatureDefs; the metrics of every answer. rest.py and
app.py (JSON over HTTP) and grpc_api.py (TF Serving's protos over gRPC) only translate
requests and answers, so both APIs answer alike and share their batches.
"""

import collections
import dataclasses

from nmt_tf.server.batching import Batcher
from nmt_tf.server.errors import CODE_NAMES, first_line, RequestError
from nmt_tf.server.metrics import Metrics

SETTINGS = ("beam_size", "nbest", "length_penalty")
# The signatures whose beam a request's "parameters" may set.
BEAM_SIGNATURES = ("beam_search", "beam_search_prefix", "beam_search_constrained")


@dataclasses.dataclass
class Limits:
  """What one request may ask (each refused with a 400 or 413 naming its flag).

  Attributes:
    max_batch_size: rows of one request, and of one batch of grouped requests.
    max_text_chars: characters of one text input.
    max_beam_size: the widest beam a request's "parameters" may ask.
    max_variants: beam searches with other settings kept traced at once (the oldest goes).
    max_body_bytes: bytes of one request body (REST) or message (gRPC).
    batch_timeout_micros: how long a batch waits for more requests after its first.
  """

  max_batch_size: int = 64
  max_text_chars: int = 2000
  max_body_bytes: int = 8 << 20
  batch_timeout_micros: int = 2000
  max_beam_size: int = 16
  max_variants: int = 8


class Service:
  """The answers of `servables` (servable.py; one or a list, the first is the page's) within
  `limits`; the methods raise RequestError for a request it cannot answer."""

  def __init__(self, servables, limits=None):
    self.set_models(servables)
    self.limits = limits or Limits()
    self.metrics = Metrics(self.limits.max_batch_size)
    self.batcher = Batcher(self.limits.max_batch_size, self.limits.batch_timeout_micros / 1e6,
                           lambda key, rows, waits: self.metrics.batch(key[0], rows, waits))
    self._variants = collections.OrderedDict()  # (name, beam, nbest, penalty) -> Signature

  def set_models(self, servables):
    """Serves `servables` (a Servable or a list, the first the page's) and no other model."""
    servables = list(servables) if isinstance(servables, (list, tuple)) else [servables]
    self.models = {servable.name: servable for servable in servables}
    self.servable = servables[0] if servables else None

  def count(self, model_name, api, entrypoint, status, seconds):
    """Counts an answered request in the metrics (metrics.py): `status` is the HTTP status
    or gRPC code name of the answer; a name served by no model is counted as ""."""
    self.metrics.request(model_name if model_name in self.models else "", api, entrypoint,
                         CODE_NAMES.get(status, "UNKNOWN") if isinstance(status, int)
                         else status, seconds)

  def resolve(self, name, version=None, label=None, failed=False):
    """(servable, version) that model `name` with `version` (digits) or `label` names; its
    latest without either. RequestError 404 when they name nothing served (with `failed`, a
    version that failed to load is named too, for its status: the version is None for a
    model none of whose versions loaded)."""
    servable = self.models.get(name)
    if servable is None or not (servable.versions or failed and servable.failed):
      raise RequestError(f"Servable not found for request: Latest({name})", 404)
    if version is not None:
      version = str(version)
      if not version.isdigit() or not (int(version) in servable.versions or
                                       failed and int(version) in servable.failed):
        raise RequestError(f"Servable not found for request: Specific({servable.name}, "
                           f"{version})", 404)
      return servable, int(version)
    if label is not None:
      if servable.labels.get(label) not in servable.versions:
        raise RequestError(f"Unrecognized servable version label: {label}", 404)
      return servable, servable.labels[label]
    return servable, servable.latest if servable.versions else None

  def status(self, servable, versions=None):
    """TF Serving's model_version_status (JSON) of `versions` of `servable`, default all:
    AVAILABLE, or END with the error of a version that failed to load."""
    if versions is None:
      versions = sorted(set(servable.versions) | set(servable.failed))
    return {"model_version_status": [
        {"version": str(v), "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}} if v in servable.versions else
        {"version": str(v), "state": "END",
         "status": {"error_code": "UNKNOWN", "error_message": servable.failed[v]}}
        for v in sorted(versions)]}

  def metadata(self, servable, version):
    """TF Serving's GetModelMetadata answer (JSON) of `version` of `servable`."""
    return {"model_spec": {"name": servable.name, "signature_name": "",
                           "version": str(version)},
            "metadata": {"signature_def": {
                "signature_def": {name: s.signature_def()
                                  for name, s in servable.versions[version].items()}}}}

  async def predict(self, model, name, read_inputs, parameters=None):
    """(version, outputs): the version that answered and the outputs ({name: numpy [batch,
    ...]}) of its signature `name`.

    Args:
      model: (model name, version or None, label or None), as `resolve` takes them.
      name: the signature's name; "" or None is serving_default.
      read_inputs: read_inputs({input name: dtype name}) -> {input name: numpy [batch]}, the
        request's inputs read for the signature's dtypes.
      parameters: a run's beam search settings ({"beam_size", "nbest", "length_penalty"}), or
        None for the served ones.
    """
    servable, version = self.resolve(*model)
    signatures = servable.versions[version]  # held: a version removed now still answers
    name = name or "serving_default"
    if not isinstance(name, str) or name not in signatures:
      raise RequestError(f"Serving signature name: \"{name}\" not found in signature def; "
                         f"this model has {sorted(signatures)}.", 404)
    signature, batch_key = signatures[name], (servable.name, version, name)
    if parameters is not None:
      settings = self._search_settings(servable, parameters, name)
      if settings != tuple(servable.beam.get(k) for k in SETTINGS):
        signature = await self._variant(servable, name, settings)
        batch_key = (servable.name, version, name, settings)
    inputs = read_inputs(signature.input_dtypes())
    rows = len(next(iter(inputs.values())))
    if rows > self.limits.max_batch_size:
      raise RequestError(f"The request has {rows} rows; this server takes at most "
                         f"{self.limits.max_batch_size} in one request (--max_batch_size).")
    for input_name, values in inputs.items():
      if input_name != "image_bytes":
        _check_lengths(input_name, values, self.limits.max_text_chars)
    if "target_lang" in inputs:
      _check_languages(inputs["target_lang"], servable.target_languages)
    if rows == 0:  # the signature's empty outputs, without a batch
      return version, signature(inputs)
    try:
      return version, await self.batcher.run(batch_key, signature, inputs)
    except Exception as error:  # pylint: disable=broad-exception-caught
      raise RequestError(first_line(error)) from error

  def _search_settings(self, servable, parameters, name):
    """(beam_size, nbest, length_penalty) of a request's "parameters"; RequestError unless
    `servable` can search with them."""
    limits = self.limits
    if servable.variant is None:
      raise RequestError("This server serves an export, whose beam search is fixed at export "
                         f"({_settings_text(servable.beam)}); serve the run (--run_dir) to "
                         "choose the beam per request.")
    if name not in BEAM_SIGNATURES:
      raise RequestError(f"\"parameters\" apply to the {', '.join(BEAM_SIGNATURES)} "
                         f"signatures, not {name}.")
    if not isinstance(parameters, dict) or set(parameters) - set(SETTINGS):
      raise RequestError(f"\"parameters\" must be an object with some of {list(SETTINGS)}.")
    merged = {**servable.beam, **parameters}
    beam, nbest, alpha = (merged[k] for k in SETTINGS)
    if not (_is_int(beam) and 1 <= beam <= limits.max_beam_size):
      raise RequestError(f"beam_size={beam!r}: expected an integer from 1 to "
                         f"{limits.max_beam_size}.")
    if not (_is_int(nbest) and 1 <= nbest <= beam):
      raise RequestError(f"nbest={nbest!r}: expected an integer from 1 to beam_size={beam}.")
    if not (isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
            and 0 <= alpha <= 5):
      raise RequestError(f"length_penalty={alpha!r}: expected a number from 0 to 5.")
    return beam, nbest, float(alpha)

  async def _variant(self, servable, name, settings):
    """The beam search Signature `name` of `servable` with `settings`, traced in the model's
    thread on first use."""
    key = (servable.name, name) + settings
    if key not in self._variants:
      if len(self._variants) >= self.limits.max_variants:
        self._variants.popitem(last=False)
      self._variants[key] = await self.batcher.in_model_thread(servable.variant,
                                                               *settings, name)
    self._variants.move_to_end(key)
    return self._variants[key]


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _settings_text(beam):
  return ", ".join(f"{k} {beam[k]}" for k in SETTINGS if k in beam) or "unknown settings"


def _check_lengths(key, values, max_chars):
  """RequestError naming --max_text_chars when a text of `values` (bytes) is longer."""
  for i, value in enumerate(values):
    if isinstance(value, bytes) and len(value) > max_chars:  # bytes >= characters
      chars = len(value.decode("utf-8", "replace"))
      if chars > max_chars:
        raise RequestError(f"The input {key}[{i}] has {chars} characters; this server "
                           f"takes at most {max_chars} (--max_text_chars).")


def _check_languages(values, languages):
  """RequestError unless every target_lang of `values` (bytes) is one of `languages` (a model
  with target-language tags; the model's own check runs when the server does not know
  them)."""
  if not languages:
    return
  for i, value in enumerate(values):
    language = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if language not in languages:
      raise RequestError(f"target_lang[{i}] is {language!r}, a language this model was not "
                         f"trained for; give one of {', '.join(languages)}.")
