"""Writes a run's model as a LiteRT (TFLite) model for devices without TensorFlow.

<export_dir>/<model_name>/<version>/ holds
  model.tflite      signatures `greedy` and `beam_search`, ids in and ids out:
                      source_ids int32 [batch, src_len]: token ids, EOS last, PAD (0) after;
                    greedy -> ids int32 [batch, max_len] (EOS last, 0 after), length [batch]
                      (EOS included), log_prob [batch], attention [batch, max_len, src_len];
                    beam_search -> the same with an n-best axis after the batch axis, and
                      score [batch, nbest] (after length and coverage penalties), best first;
  vocab/            the run's tokenizer files (SentencePiece models or word lists);
  nmt_litert.json   what a client needs: tokenizer files, limits, source reversal;
  nmt_litert.py     a client: text in, translations out, with `ai_edge_litert`, `numpy` and
                    `sentencepiece` only (export/litert_client.py, copied);
  nmt_manifest.py   the content check the client runs (nmt_tf/manifest.py, copied);
  manifest.json     the checksums of model.tflite, nmt_litert.json and vocab/, and the
                    vocabulary sizes the model was built with.

Only LiteRT builtin ops: tokenization stays in the client (SentencePiece is no builtin). Two
things make the search convertible: the variables are frozen into constants (read inside a
while loop, the converter would keep them as uninitialized resource variables), and the
encoder's time loop runs without TensorArrays (`layers.kernels.without_tensor_lists`).
"""

import dataclasses
import os
import shutil
import tempfile

import tensorflow as tf
# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from nmt_tf import manifest
from nmt_tf import write_path
from nmt_tf.export import exporter
from nmt_tf.export import litert_client
from nmt_tf.experiment import RunDir, run_manifest
from nmt_tf.inference.loading import load_models
from nmt_tf.inference.translator import Translator
from nmt_tf.layers import kernels

MODEL_FILE = litert_client.MODEL_FILE
METADATA_FILE = litert_client.METADATA_FILE
CLIENT_FILE = "nmt_litert.py"
MANIFEST_MODULE = litert_client.MANIFEST_MODULE
QUANTIZATIONS = ("float32", "float16", "int8")
_SOURCE_IDS = tf.TensorSpec([None, None], tf.int32, name="source_ids")


class LiteRTExportError(exporter.ExportError):
  """A bad LiteRT export argument, or a model the converter cannot lower to builtins."""


def search_functions(translator, beam_size, nbest):
  """{signature name: tf.function(source_ids) -> dict of outputs} (see module docstring)."""

  def greedy(source_ids):
    with kernels.without_tensor_lists():
      result = translator.translate_ids(source_ids, beam_size=1, nbest=1, compact=False)
    return {"ids": result.ids[:, 0], "length": result.lengths[:, 0],  # [batch, max_len], [b]
            "log_prob": result.log_probs[:, 0],  # [batch]
            "attention": result.attention[:, 0]}  # [batch, max_len, src_len]

  def beam_search(source_ids):
    with kernels.without_tensor_lists():
      result = translator.translate_ids(source_ids, beam_size=beam_size, nbest=nbest,
                                        compact=False)
    return {"ids": result.ids, "length": result.lengths,  # [b, nbest, max_len], [b, nbest]
            "log_prob": result.log_probs, "score": result.scores,  # [batch, nbest]
            "attention": result.attention}  # [batch, nbest, max_len, src_len]

  return {name: tf.function(fn, input_signature=[_SOURCE_IDS], autograph=False)
          for name, fn in (("greedy", greedy), ("beam_search", beam_search))}


def _frozen(function):
  """The concrete function of tf.function `function` with its variables as constants, and
  its output names kept (freezing returns a flat list)."""
  concrete = function.get_concrete_function()
  names = sorted(concrete.structured_outputs)  # the flat order of a dict
  constant = convert_variables_to_constants_v2(concrete)

  @tf.function(input_signature=[_SOURCE_IDS], autograph=False)
  def named(source_ids):
    return dict(zip(names, constant(source_ids)))

  return named.get_concrete_function()


def convert(functions, quantization="float32"):
  """tf.functions of `search_functions` -> the bytes of one .tflite model with one signature
  each, builtin ops only.

  Args:
    functions: {signature name: tf.function}.
    quantization: "float32"; "float16" (weights stored in float16, computed in float32);
      "int8" (dynamic-range quantization: int8 weights, activations quantized on the fly).
  """
  if quantization not in QUANTIZATIONS:
    raise LiteRTExportError(f"Received quantization={quantization!r}; expected one of "
                            f"{QUANTIZATIONS}.")
  # Several signatures convert only from a SavedModel: one of the frozen functions.
  staging = tempfile.mkdtemp(prefix="nmt_tf_litert_")
  try:
    signatures = {name: _frozen(function) for name, function in functions.items()}
    tf.saved_model.save(tf.Module(), staging, signatures=signatures)
    return _convert_saved(staging, list(signatures), quantization)
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def _convert_saved(path, names, quantization):
  converter = tf.lite.TFLiteConverter.from_saved_model(path, signature_keys=names)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantization != "float32":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if quantization == "float16":
    converter.target_spec.supported_types = [tf.float16]
  try:
    flat = converter.convert()
  except Exception as error:  # pylint: disable=broad-except  # ConverterError and friends
    first = " ".join(str(error).split())[:300]
    raise LiteRTExportError(f"The LiteRT converter could not lower this model to builtin ops "
                            f"({first}); export it as a SavedModel instead.") from None
  return flat


def export_litert(run_dir, checkpoint="best", export_dir=None, model_name="nmt_litert",
                  version=None, beam_size=None, nbest=None,
                  max_source_length=litert_client.DEFAULT_MAX_SOURCE_LENGTH,
                  decode_config=None, quantization="float32", checkpoints=None, report=print,
                  hard_inference=None):
  """Exports checkpoint `checkpoint` of `run_dir` (or an ensemble) as a LiteRT model.

  Arguments as `export_run` (export/exporter.py), and quantization: "float32", "float16" or
  "int8" (see `convert`).

  Returns:
    The path of the written version directory.
  """
  run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
  if quantization not in QUANTIZATIONS:
    raise LiteRTExportError(f"Received quantization={quantization!r}; expected one of "
                            f"{QUANTIZATIONS}.")
  exporter.check_name_and_length(model_name, max_source_length)
  model_dir = exporter.check_destination(run, export_dir, model_name)
  loaded = load_models(run.path, checkpoint, checkpoints,  # its files checked (manifest)
                       hard_inference)
  with exporter.new_version(model_dir, version, report) as (path, tmp):
    _export(run, loaded, tmp, beam_size, nbest, max_source_length, decode_config,
            quantization)
  return path


def _export(run, loaded, tmp, beam_size, nbest, max_source_length, decode_config,
            quantization):
  """Writes the files of export_litert into the staging folder `tmp`, its manifest last."""
  model, config, src_tok, tgt_tok, paths = loaded
  # float32 products: the quantizations make the file smaller, not bfloat16 (no LiteRT builtin).
  decode_config = dataclasses.replace(decode_config or config.decode, precision="float32")
  beam_size, nbest = exporter.beam_and_nbest(beam_size, nbest, decode_config)
  translator = Translator(model, src_tok, tgt_tok, decode_config, max_source_length)
  flat = convert(search_functions(translator, beam_size, nbest), quantization)
  write_path.write_bytes(os.path.join(tmp, MODEL_FILE), flat)
  try:
    shutil.copytree(run.vocab_dir, os.path.join(tmp, "vocab"))
    shutil.copyfile(litert_client.__file__, os.path.join(tmp, CLIENT_FILE))
    shutil.copyfile(manifest.__file__, os.path.join(tmp, MANIFEST_MODULE))
  except OSError as error:
    raise write_path.os_error(error, tmp) from None
  metadata = {
      "format": "litert", "quantization": quantization,
      "vocab_dir": "vocab", "max_source_length": max_source_length,
      "beam_size": beam_size, "nbest": nbest, "max_length": decode_config.max_length,
      "decode": dataclasses.asdict(decode_config), "model": config.model.to_dict(),
      "run_dir": run.path, "checkpoints": paths,
  }
  write_path.write_json(os.path.join(tmp, METADATA_FILE), metadata)
  files = [MODEL_FILE, METADATA_FILE] + manifest.files_below(tmp, "vocab")
  write_path.write_json(os.path.join(tmp, manifest.FILE), manifest.record(
      tmp, files, run_manifest.vocab_sizes(src_tok, tgt_tok)))
