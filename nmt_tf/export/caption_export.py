"""Exports a captioning run as a TF Serving SavedModel: image bytes in, caption out.

Signatures (docs/EXPORT.md, "Captioning runs"):
  caption (also serving_default)  image_bytes tf.string [batch] (JPEG, PNG, GIF or BMP) ->
                                  caption [batch], log_prob [batch], caption_length [batch],
                                  attention [batch, len, L] (weights over the L cells of the
                                  image's annotation grid, row by row), greedy search
  beam_search                     the same -> caption [batch, nbest], score, log_prob,
                                  caption_length [batch, nbest], attention
                                  [batch, nbest, len, L]
Each image is decoded and resized to the model's image_size inside the graph. The version
directory is written and renamed as the translation export's (exporter.py): never over an
existing version.
"""

import dataclasses
import os

import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.export.exporter import (beam_and_nbest, check_destination, ExportError,
                                    METADATA_FILE, new_version, serving_decode_config,
                                    track_variables)
from nmt_tf.export.ops import check_forbidden_ops
from nmt_tf.inference.image_captioner import Captioner
from nmt_tf.inference.loading import load_models

IMAGES = tf.TensorSpec([None], tf.string, name="image_bytes")


class CaptionServingModule(tf.Module):
  """The exported functions of a Captioner (module docstring)."""

  def __init__(self, captioner, beam_size, nbest, name=None):
    super().__init__(name=name)
    self.captioner = captioner
    self.beam_size = beam_size
    self.nbest = nbest
    self.grid = captioner.grid

  def _run(self, image_bytes, beam_size, nbest):
    """The outputs of beam_search (nbest axis kept), zeros of shape [0, ...] for no image."""
    cells = self.grid[0] * self.grid[1]

    def outputs():
      out = self.captioner.caption_bytes(image_bytes, beam_size, nbest)
      lengths = out["lengths"]  # [batch, nbest]
      return {"caption": out["caption"], "log_prob": out["log_probs"],
              "score": out["scores"], "caption_length": lengths,
              "attention": out["attention"][:, :, :tf.reduce_max(lengths)]}

    def empty():
      return {"caption": tf.zeros([0, nbest], tf.string),
              "log_prob": tf.zeros([0, nbest]), "score": tf.zeros([0, nbest]),
              "caption_length": tf.zeros([0, nbest], tf.int32),
              "attention": tf.zeros([0, nbest, 0, cells])}
    return tf.cond(tf.size(image_bytes) > 0, outputs, empty)

  @tf.function(input_signature=[IMAGES], autograph=False)
  def caption(self, image_bytes):
    out = self._run(image_bytes, 1, 1)
    return {"caption": out["caption"][:, 0], "log_prob": out["log_prob"][:, 0],
            "caption_length": out["caption_length"][:, 0],
            "attention": out["attention"][:, 0]}

  @tf.function(input_signature=[IMAGES], autograph=False)
  def beam_search(self, image_bytes):
    return self._run(image_bytes, self.beam_size, self.nbest)

  def signatures(self):
    return {"serving_default": self.caption, "caption": self.caption,
            "beam_search": self.beam_search}


def export_captioner(run, checkpoint="best", export_dir=None, model_name="nmt_caption",
                     version=None, beam_size=None, nbest=None, decode_config=None,
                     checkpoints=None, report=print, hard_inference=None):
  """Exports checkpoint `checkpoint` of the captioning run `run` (a RunDir); returns the path
  of the written version directory. The arguments are export_run's."""
  if checkpoints:
    raise ExportError("Ensembles of captioning runs are not exported; export one run "
                      "(leave --checkpoints out).")
  model_dir = check_destination(run, export_dir, model_name)
  loaded = load_models(run.path, checkpoint,  # its files checked (manifest)
                       hard_inference=hard_inference)
  with new_version(model_dir, version, report) as (path, tmp):
    _export(run, loaded, path, tmp, model_name, beam_size, nbest, decode_config)
  return path


def _export(run, loaded, path, tmp, model_name, beam_size, nbest, decode_config):
  """Writes the SavedModel of export_captioner into the staging folder `tmp`."""
  model, config, _, tokenizer, paths = loaded
  decode_config = serving_decode_config(decode_config or config.decode)
  beam_size, nbest = beam_and_nbest(beam_size, nbest, decode_config)
  module = CaptionServingModule(Captioner(model, tokenizer, decode_config), beam_size,
                                nbest)
  signatures = {name: fn.get_concrete_function() for name, fn in module.signatures().items()}
  root = tf.Module()
  root.tokenizer = tokenizer
  tf.saved_model.save(track_variables(root, signatures.values()), tmp, signatures=signatures)
  check_forbidden_ops(tmp)
  metadata = {"run_dir": run.path, "checkpoint": paths[0], "model_name": model_name,
              "version": int(os.path.basename(path)), "beam_size": beam_size, "nbest": nbest,
              "decode": dataclasses.asdict(decode_config), "model": config.model.to_dict(),
              "annotation_grid": list(module.grid), "task": "caption"}
  write_path.make_folder(os.path.join(tmp, "assets.extra"))
  write_path.write_json(os.path.join(tmp, "assets.extra", METADATA_FILE), metadata)
