"""The model a server serves: its versions, each a set of named signatures.

A version is either an exported SavedModel (`nmt-tf export`; `load_export`) or the best
checkpoint of a run decoded in this process (`load_run`), through the same tf.functions the
export saves (nmt_tf/export/serving.py, caption_export.py), so both answer alike.
"""

import dataclasses
import json
import os
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from nmt_tf.export.exporter import DEFAULT_MAX_SOURCE_LENGTH, METADATA_FILE
from nmt_tf.server import model_config
from nmt_tf.server.rest import tensor_info

# The padded axes of each output of the exported signatures, as the output giving each
# axis's length: cut to a request's own longest, a batched answer equals the answer of the
# request alone. Outputs not listed have no padded axis.
PADDED_AXES = {
    "source_tokens": ("source_length",),
    "target_tokens": ("target_length",),
    "alignment": ("target_length", "source_length"),
    "token_log_prob": ("target_length",),
    "words": ("word_count",),
    "word_log_prob": ("word_count",),
    "attention": ("caption_length", None),
}


class ServeError(ValueError):
  """A model that cannot be served (missing or not a SavedModel); one line naming the fix."""


@dataclasses.dataclass
class Signature:
  """One signature: its function and the dtype and shape of its inputs and outputs."""

  name: str
  function: tf.types.experimental.ConcreteFunction
  inputs: Dict[str, Tuple[str, List[Optional[int]]]]
  outputs: Dict[str, Tuple[str, List[Optional[int]]]]
  positional: Tuple[str, ...] = ()  # the inputs a traced function takes by position
  owner: object = None  # what holds the function's variables (a loaded SavedModel)

  @classmethod
  def of(cls, name, function, owner=None):
    """The Signature of a concrete function: a loaded SavedModel's (inputs by keyword) or a
    traced one's (inputs by position, named by their TensorSpecs; an optional input the
    signature leaves out, such as the target_lang of a model without tags, is None).
    `owner` is kept alive with the Signature: a version taken out of service answers the
    requests that already hold its signatures."""
    args, specs = function.structured_input_signature
    args = [spec for spec in args if spec is not None]
    specs = dict(specs) or {spec.name: spec for spec in args}
    outputs = function.structured_outputs
    return cls(name, function,
               {k: (s.dtype.name, s.shape.as_list()) for k, s in specs.items()},
               {k: (s.dtype.name, s.shape.as_list()) for k, s in outputs.items()},
               tuple(spec.name for spec in args), owner)

  def input_dtypes(self):
    return {name: dtype for name, (dtype, _) in self.inputs.items()}

  def __call__(self, inputs):
    """{input: numpy [batch]} -> {output: numpy [batch, ...]}."""
    tensors = {k: tf.constant(v, tf.as_dtype(self.inputs[k][0])) for k, v in inputs.items()}
    if self.positional:
      outputs = self.function(*[tensors[k] for k in self.positional])
    else:
      outputs = self.function(**tensors)
    return {k: v.numpy() for k, v in outputs.items()}

  def signature_def(self):
    """TF Serving's SignatureDef JSON (metadata)."""
    return {"inputs": {k: tensor_info(f"{self.name}_{k}:0", d, s)
                       for k, (d, s) in self.inputs.items()},
            "outputs": {k: tensor_info(f"StatefulPartitionedCall:{i}", d, s)
                        for i, (k, (d, s)) in enumerate(sorted(self.outputs.items()))},
            "method_name": "tensorflow/serving/predict"}


@dataclasses.dataclass
class Servable:
  """A named model: {version: {signature name: Signature}}, labels naming versions, and
  `task` ("translate" or "caption"), which the page reads. `target_languages`: those the
  `target_lang` input of a model with target-language tags takes (data/target_tags.py).

  `entry` (model_config.ModelEntry), for a model served from a base path of versions: what
  the server watches for new and removed versions (reload.py); `failed` {version: one line}
  holds the versions that did not load.

  `beam` holds the settings of the newest version's beam_search signature (beam_size, nbest,
  length_penalty; empty when unknown). `variant`, for a run decoded in this process, makes a
  beam search Signature with other settings: variant(beam_size, nbest, length_penalty, name)
  for name beam_search (the default), beam_search_prefix or beam_search_constrained.
  """

  name: str
  versions: Dict[int, Dict[str, Signature]]
  task: str = "translate"
  labels: Dict[str, int] = dataclasses.field(default_factory=dict)
  keep: list = dataclasses.field(default_factory=list)  # what holds the variables
  beam: Dict[str, float] = dataclasses.field(default_factory=dict)
  variant: Optional[Callable[..., Signature]] = None
  target_languages: Tuple[str, ...] = ()  # a model with target-language tags: its input
  entry: Optional[model_config.ModelEntry] = None
  failed: Dict[int, str] = dataclasses.field(default_factory=dict)

  @property
  def latest(self):
    return max(self.versions)

  def describe(self, version_dir):
    """Takes task, beam settings and target languages from the export at `version_dir` (the
    newest version's)."""
    meta = _export_metadata(version_dir)
    self.task = _task(self.versions[max(self.versions)])
    self.beam = _export_beam(meta)
    self.target_languages = tuple(meta.get("target_languages") or ())


def rows_of(outputs, start, stop):
  """The outputs of rows [start, stop) of a batch, their padded axes cut to those rows' own
  longest (PADDED_AXES), as a call with those rows alone answers."""
  part = {k: v[start:stop] for k, v in outputs.items()}
  for key, lengths in PADDED_AXES.items():
    if key not in part:
      continue
    value = part[key]
    first_padded = value.ndim - len(lengths)
    index = [slice(None)] * value.ndim
    for axis, length_key in enumerate(lengths, start=first_padded):
      if length_key is None or length_key not in part:
        continue
      width = int(part[length_key].max()) if part[length_key].size else 0
      index[axis] = slice(0, width)
    part[key] = value[tuple(index)]
  return part


def _task(signatures):
  first = next(iter(signatures.values()))
  return "caption" if "image_bytes" in first.inputs else "translate"


def load_export(path, model_name=None):
  """The versions of an export: `path` is a version directory (saved_model.pb), a model's
  directory of versions (1/, 2/, ...; every version served, and watched for new ones) or a
  base directory holding MODEL_NAME/ (default nmt). The model's name is `model_name`, else
  its directory's."""
  if not os.path.isdir(path):
    raise ServeError(f"--export_dir={path} is not a directory; pass a folder written by "
                     "`nmt-tf export` (RUN/export, RUN/export/nmt or RUN/export/nmt/1).")
  if os.path.isfile(os.path.join(path, "saved_model.pb")):
    name = os.path.basename(os.path.normpath(path))
    version = int(name) if name.isdigit() else 1
    if name.isdigit():
      model_name = model_name or os.path.basename(os.path.dirname(os.path.normpath(path)))
    servable = Servable(model_name or "nmt", {version: load_version(path)})
    servable.describe(path)
    return servable
  if not model_config.version_folders(path):
    inner = os.path.join(path, model_name or "nmt")
    if os.path.isdir(inner):
      return load_export(inner, model_name or "nmt")
    raise ServeError(f"{path} holds no SavedModel version (N/saved_model.pb) nor "
                     f"{model_name or 'nmt'}/; export the run first (`nmt-tf export`) or "
                     "pass its export directory.")
  model_name = model_name or os.path.basename(os.path.normpath(path))
  return load_entry(model_config.ModelEntry(model_name, os.path.abspath(path),
                                            model_config.ALL, ()))


def load_entry(entry, report=None):
  """The Servable of a model config entry: the versions its policy picks under its base
  path. A version that fails to load is reported (`report(line)`) and kept in `failed`;
  ServeError when none loads or a label names a version not served. A base path without a
  version yet gives a Servable without versions (reported), served once one arrives, as TF
  Serving waits for it."""
  found = model_config.version_folders(entry.base_path)
  if not entry.wanted(found):
    if report:
      report(f"model {entry.name}: no version under {entry.base_path} yet; served once one "
             "is exported there")
    return Servable(entry.name, {}, labels=dict(entry.labels), entry=entry)
  versions, failed = {}, {}
  for version in entry.wanted(found):
    try:
      versions[version] = load_version(found[version])
    except ServeError as error:
      failed[version] = str(error)
      if report:
        report(f"model {entry.name} version {version} not served: {error}")
  if not versions:
    raise ServeError(f"model {entry.name}: no version under {entry.base_path} loads "
                     f"({next(iter(failed.values())) if failed else 'none is there'}); export "
                     "one there (`nmt-tf export --export_dir=...`) first.")
  check_labels(entry, versions)
  servable = Servable(entry.name, versions, labels=dict(entry.labels), entry=entry,
                      failed=failed)
  servable.describe(found[max(versions)])
  return servable


def check_labels(entry, versions):
  """ServeError unless every label of `entry` names one of `versions`."""
  for label, version in entry.labels.items():
    if version not in versions:
      raise ServeError(f"model {entry.name}: label {label!r} names version {version}, which "
                       f"is not served (served: {sorted(versions)}).")


def load_version(version_dir):
  """{signature name: Signature} of the SavedModel at `version_dir`; ServeError naming the
  fix when it does not load. tensorflow-text's ops are registered first, as TF Serving's
  model server has them: an export's SentencePiece tokenizers need them."""
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  try:
    loaded = tf.saved_model.load(version_dir)
  except (OSError, ValueError, RuntimeError, tf.errors.OpError) as error:
    raise ServeError(f"{version_dir} does not load as a SavedModel ({type(error).__name__});"
                     " export the run again.") from error
  return {name: Signature.of(name, fn, loaded) for name, fn in loaded.signatures.items()}


def _export_metadata(version_dir):
  """The metadata of an export (assets.extra/METADATA_FILE), or {}."""
  try:
    with open(os.path.join(version_dir, "assets.extra", METADATA_FILE), encoding="utf-8") as f:
      meta = json.load(f)
  except (OSError, ValueError):
    return {}
  return meta if isinstance(meta, dict) else {}


def _export_beam(meta):
  """The beam settings an export's metadata records, or {}."""
  try:
    return {"beam_size": meta["beam_size"], "nbest": meta["nbest"],
            "length_penalty": meta["decode"]["length_penalty"]}
  except (KeyError, TypeError):
    return {}


def load_run(run_dir, checkpoint="best", model_name=None, beam_size=None, nbest=None,
             decode_config=None, max_source_length=DEFAULT_MAX_SOURCE_LENGTH,
             hard_inference=None):
  """Version 1: checkpoint `checkpoint` of run `run_dir`, decoded in this process by the
  signatures its export would have (greedy, beam_search, score; caption and beam_search for
  a captioning run), named `model_name` (default nmt, or nmt_caption); hard_inference as
  export_run's."""
  # pylint: disable=g-import-not-at-top
  from nmt_tf.export.caption_export import CaptionServingModule
  from nmt_tf.export.exporter import beam_and_nbest
  from nmt_tf.export.serving import ServingModule
  from nmt_tf.inference.image_captioner import Captioner
  from nmt_tf.inference.loading import load_models
  from nmt_tf.inference.translator import Translator
  from nmt_tf.data import target_tags
  model, config, src_tok, tgt_tok, _ = load_models(run_dir, checkpoint,
                                                   hard_inference=hard_inference)
  languages = target_tags.target_languages(config.data)
  decode_config = decode_config or config.decode
  beam_size, nbest = beam_and_nbest(beam_size, nbest, decode_config)

  def module(beam, n, decode):
    if config.model.encoder == "image":
      return CaptionServingModule(Captioner(model, tgt_tok, decode), beam, n)
    return ServingModule(Translator(model, src_tok, tgt_tok, decode, max_source_length,
                                    target_languages=languages), beam, n)

  def variant(beam, n, length_penalty, name="beam_search"):
    decode = dataclasses.replace(decode_config, length_penalty=length_penalty)
    made = module(beam, n, decode)  # the concrete function holds it, and drops it with itself
    return Signature.of(name, made.signatures()[name].get_concrete_function())

  served = module(beam_size, nbest, decode_config)
  signatures = {name: Signature.of(name, fn.get_concrete_function())
                for name, fn in served.signatures().items()}
  task = _task(signatures)
  default_name = "nmt_caption" if task == "caption" else "nmt"
  return Servable(model_name or default_name, {1: signatures}, task, keep=[served],
                  beam={"beam_size": beam_size, "nbest": nbest,
                        "length_penalty": decode_config.length_penalty}, variant=variant,
                  target_languages=languages)


def warm_up(servable, versions=None):
  """Runs every translation signature of `versions` ({version: signatures}, default every
  version of `servable`) once (the first call of a traced function builds its graph), so
  that the first client does not wait for it."""
  for signatures in (servable.versions if versions is None else versions).values():
    for signature in signatures.values():
      if all(dtype == "string" for dtype, _ in signature.inputs.values()) and \
          "image_bytes" not in signature.inputs:
        language = (servable.target_languages or ("",))[0].encode("utf-8")
        signature({name: np.array([language if name == "target_lang" else b"a"], object)
                   for name in signature.inputs})
