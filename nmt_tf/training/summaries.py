"""TensorBoard output of a run (run_dir/tensorboard).

  train/loss, train/perplexity, train/learning_rate, train/grad_norm, train/tokens_per_sec
  valid/loss, valid/perplexity, valid/bleu,
  valid/length_ratio                              scalars (length_ratio: of the BLEU)
  valid/alignment/<i>                             attention heat maps (PNG) of fixed sentences
  valid/alignment_beam/<i>                        the same with beam search (decode.beam_size)
  valid/samples                                   source | reference | greedy output table
  config                                          the ExperimentConfig as JSON text
  hparams                                         the TensorBoard HParams plugin session
Only the chief worker writes; other workers get a no-op writer.
"""

import json

from absl import logging
import tensorflow as tf


def _flatten(values, prefix=""):
  flat = {}
  for key, value in values.items():
    name = f"{prefix}{key}"
    if isinstance(value, dict):
      flat.update(_flatten(value, name + "."))
    elif isinstance(value, (bool, int, float, str)):
      flat[name] = value
    elif value is not None:
      flat[name] = str(value)
  return flat


class Summaries:
  """Writes a run's TensorBoard events.

  Args:
    log_dir: event directory, or None for a no-op writer (non-chief workers).
  """

  def __init__(self, log_dir):
    self.writer = tf.summary.create_file_writer(log_dir) if log_dir else \
        tf.summary.create_noop_writer()

  def config(self, config, step):
    """The config as text and, if the plugin is available, as HParams."""
    with self.writer.as_default(step=step):
      tf.summary.text("config", "```\n" + config.to_json() + "\n```")
      try:
        from tensorboard.plugins.hparams import api as hp  # pylint: disable=g-import-not-at-top
        hp.hparams(_flatten(json.loads(config.to_json())))
      except ImportError as error:
        logging.info("No HParams summary (%s).", error)
    self.writer.flush()

  def scalars(self, values, step, prefix):
    with self.writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(f"{prefix}/{name}", float(value))

  def validation(self, result, step):
    """A ValidationResult: scalars, alignment images and sample translations."""
    self.scalars({"loss": result.loss, "perplexity": result.perplexity, "bleu": result.bleu,
                  "length_ratio": result.length_ratio}, step, "valid")
    with self.writer.as_default(step=step):
      for tag, images in (("alignment", result.alignments),
                          ("alignment_beam", result.beam_alignments)):
        for i, (title, png) in enumerate(images):
          image = tf.io.decode_png(png, channels=3)[tf.newaxis]  # [1, height, width, 3]
          tf.summary.image(f"valid/{tag}/{i}", image, step=step,
                           description=f"Attention of {title} (x: source, y: target)")
      rows = ["| source | reference | greedy translation |", "|---|---|---|"]
      rows += [f"| {_cell(s)} | {_cell(r)} | {_cell(h)} |" for s, r, h in result.samples]
      tf.summary.text("valid/samples", "\n".join(rows))
    self.writer.flush()

  def flush(self):
    self.writer.flush()

  def close(self):
    self.writer.close()


def _cell(text):
  return text.replace("|", "\\|").replace("\n", " ")
