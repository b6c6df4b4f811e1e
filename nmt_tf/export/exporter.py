"""Writes a run's model as a TF Serving SavedModel: <export_dir>/<model_name>/<version>/.

TF Serving loads every integer-named subdirectory of a model's base path as a version
(the highest by default), so a version is first written to a hidden staging folder and
renamed when complete: the server never sees half a SavedModel. Exports of one model hold
its folder's lock (`new_version`), so two at once take two versions, one after the other.
"""

import contextlib
import dataclasses
import os
import shutil

import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.data import target_tags
from nmt_tf.experiment import RunDir
from nmt_tf.export.ops import check_forbidden_ops
from nmt_tf.export.serving import ServingModule
from nmt_tf.export.warmup import write_warmup_file
from nmt_tf.inference import search_memory
from nmt_tf.inference.loading import load_models
from nmt_tf.inference.translator import Translator

DEFAULT_MAX_SOURCE_LENGTH = 200
METADATA_FILE = "nmt_export.json"  # in assets.extra/, next to the SavedModel


class ExportError(ValueError):
  """A bad export argument or destination."""


def next_version(model_dir):
  """1 + the largest integer-named subdirectory of model_dir (1 if there is none)."""
  if not os.path.isdir(model_dir):
    return 1
  versions = [int(n) for n in os.listdir(model_dir) if n.isdigit()]
  return max(versions, default=0) + 1


def unfinished_versions(model_dir):
  """The hidden staging folders of versions of model_dir whose export never completed
  (write_path.staged_folder names them `.<version>.tmp-...`; older versions `.tmp-<version>`)."""
  if not os.path.isdir(model_dir):
    return []
  return sorted(os.path.join(model_dir, name) for name in os.listdir(model_dir)
                if name.startswith(".") and ".tmp-" in name)


def check_name_and_length(model_name, max_source_length):
  """Raises ExportError unless model_name is a plain directory name and max_source_length a
  positive integer."""
  if not model_name or os.sep in model_name or model_name.startswith("."):
    raise ExportError(f"Received model_name={model_name!r}; expected a plain directory name "
                      "such as 'nmt'.")
  if not (isinstance(max_source_length, int) and max_source_length > 0):
    raise ExportError(f"Received max_source_length={max_source_length!r}; expected a "
                      "positive integer.")


def beam_and_nbest(beam_size, nbest, decode_config):
  """(beam size, n-best size) of an exported beam search: the given ones, else the decode
  config's beam and the whole beam; ExportError when nbest > beam_size."""
  beam_size = beam_size or decode_config.beam_size
  nbest = nbest or beam_size
  if nbest > beam_size:
    raise ExportError(f"Received nbest={nbest} > beam_size={beam_size}; lower nbest or raise "
                      "the beam size.")
  return beam_size, nbest


def claim_version(model_dir, version, report=print):
  """The directory of a new version of the model in model_dir: `version`, or the next free
  one; never an existing one. Call it holding the model's lock (`new_version`): a staging
  folder found then was left by an export that was interrupted, and is removed (said through
  `report`)."""
  version = next_version(model_dir) if version is None else version
  if not (isinstance(version, int) and version > 0):
    raise ExportError(f"Received version={version!r}; expected a positive integer.")
  path = os.path.join(model_dir, str(version))
  if os.path.exists(path):
    raise ExportError(f"{path} already exists; pass another version or leave it unset to "
                      "use the next free one.")
  for leftover in unfinished_versions(model_dir):
    shutil.rmtree(leftover, ignore_errors=True)
    report(f"Removed {leftover}: left by an export that was interrupted (never a complete "
           "version).")
  return path


def check_destination(run, export_dir, model_name):
  """WriteError, before any work, for an export destination that is a file or lies inside
  the run's best/ or checkpoints/; returns the model's folder."""
  base = export_dir or run.export_dir
  write_path.check_folder(base, "--export_dir", owner="export")
  model_dir = os.path.join(base, model_name)
  write_path.check_folder(model_dir, "--export_model_name", owner="export")
  return model_dir


@contextlib.contextmanager
def new_version(model_dir, version, report=print):
  """Yields (path, staging folder) of a new version in `model_dir` (from check_destination),
  holding the model folder's lock for the block (a second export of the same model waits,
  then takes the next version); the staging folder is renamed to `path` when the block ends
  without error and removed otherwise (nmt_tf/write_path.py)."""
  base, model_name = os.path.split(model_dir)
  # The lock beside the model's folder: TF Serving reads the folder itself.
  with write_path.exclusive(base, f"an export into {model_dir}", report,
                            name=f".{model_name}.lock"):
    path = claim_version(model_dir, version, report)
    with write_path.staged_folder(path) as tmp:
      yield path, tmp


def saved_root(module, functions):
  """The object tf.saved_model.save writes: the tokenizers and the model's variables.

  The Keras model itself is left out: saving a Keras 3 model inside a tf.Module writes each
  weight twice (the keras.Variable and the tf.Variable it wraps) and the signatures read the
  copy that TF1-style loaders (TF Serving, saved_model_cli run) never restore ("Could not find
  variable"). Tracking the tf.Variables the signatures capture, as keras.export.ExportArchive
  does, writes each weight once.
  """
  root = tf.Module()
  root.source_tokenizer = module.translator.source_tokenizer
  root.target_tokenizer = module.translator.target_tokenizer
  return track_variables(root, functions)


def track_variables(root, functions):
  """`root` with the tf.Variables that the concrete `functions` capture, each once, as
  `root.variables_used` (see saved_root)."""
  seen = {}
  for function in functions:
    for variable in function.variables:
      seen.setdefault(id(variable), variable)
  root.variables_used = list(seen.values())
  return root


def serving_decode_config(decode_config):
  """decode_config with precision auto made float32: the SavedModel runs on the serving
  machine, not this one, and float32 runs well on every CPU; decode.precision=
  float32_bf16_matmul exports bfloat16 products for servers with AMX or AVX512_BF16."""
  if decode_config.precision == "auto":
    return dataclasses.replace(decode_config, precision="float32")
  return decode_config


def export_run(run_dir, checkpoint="best", export_dir=None, model_name="nmt", version=None,
               beam_size=None, nbest=None, max_source_length=DEFAULT_MAX_SOURCE_LENGTH,
               decode_config=None, warmup=True, checkpoints=None, report=print,
               hard_inference=None):
  """Exports checkpoint `checkpoint` of `run_dir`, or an ensemble, for TF Serving.

  Args:
    run_dir: a run directory (path or RunDir).
    checkpoint: "best", "last" or a checkpoint prefix.
    checkpoints: optional ensemble members, as `run.py translate --checkpoints`
      (inference/loading.py): checkpoint prefixes of run_dir and/or run directories. Two or
      more are exported as one model whose every step averages the members' log-probabilities.
    export_dir: base directory; default <run_dir>/export.
    model_name: TF Serving model name (a subdirectory of export_dir).
    version: positive integer; default the next free one.
    beam_size: beam of the `beam_search` signature; default decode_config.beam_size.
    nbest: hypotheses returned by `beam_search`; default beam_size (the whole beam).
    max_source_length: longer sources are cut to this many tokens and flagged `truncated`.
    decode_config: DecodeConfig (penalties, max_length...); default the run's config.decode.
    warmup: write assets.extra/tf_serving_warmup_requests (export/warmup.py), which TF
      Serving replays before the version serves.
    report: called with a one-line note about unfinished exports found in the model's
      directory (the one of this version is removed, others are named).
    hard_inference: optional "expectation" or "argmax" in place of the run's
      model.hard_inference (hard-attention runs only).

  Returns:
    The path of the written version directory.
  """
  run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
  check_name_and_length(model_name, max_source_length)
  model_dir = check_destination(run, export_dir, model_name)
  loaded = load_models(run.path, checkpoint, checkpoints,  # its files checked (manifest)
                       hard_inference)
  with new_version(model_dir, version, report) as (path, tmp):
    _export(run, loaded, path, tmp, model_name, beam_size, nbest, max_source_length,
            decode_config, warmup)
  return path


def _export(run, loaded, path, tmp, model_name, beam_size, nbest, max_source_length,
            decode_config, warmup):
  """Writes the SavedModel of export_run into the staging folder `tmp` of version `path`."""
  model, config, src_tok, tgt_tok, paths = loaded
  decode_config = serving_decode_config(decode_config or config.decode)
  beam_size, nbest = beam_and_nbest(beam_size, nbest, decode_config)
  version = int(os.path.basename(path))

  # A beam whose search of one longest sentence cannot fit would fail every request.
  search_memory.batch_limit(beam_size, decode_config.max_length, max_source_length + 1,
                            tgt_tok.vocab_size)
  languages = target_tags.target_languages(config.data)
  translator = Translator(model, src_tok, tgt_tok, decode_config, max_source_length,
                          target_languages=languages)
  module = ServingModule(translator, beam_size, nbest)
  signatures = {name: fn.get_concrete_function() for name, fn in module.signatures().items()}
  tf.saved_model.save(saved_root(module, signatures.values()), tmp, signatures=signatures)
  check_forbidden_ops(tmp)
  metadata = {
      "run_dir": run.path, "checkpoint": paths[0], "checkpoints": paths,
      "model_name": model_name, "version": version, "beam_size": beam_size, "nbest": nbest,
      "max_source_length": max_source_length, "decode": dataclasses.asdict(decode_config),
      "model": config.model.to_dict(), "tokenizer": src_tok.kind,
      "target_languages": list(languages),
  }
  write_path.make_folder(os.path.join(tmp, "assets.extra"))
  write_path.write_json(os.path.join(tmp, "assets.extra", METADATA_FILE), metadata)
  if warmup:
    write_warmup_file(tmp, model_name, src_tok, languages)
