"""The Python API of a captioning run: `nmt_tf.load_captioner(run_dir).caption(images)`.

  captioner = nmt_tf.load_captioner("runs/shapes")
  best = captioner.caption("image.png", beam_size=5)   # or bytes, an array, or a list of them
  best.text, best.score, best.log_prob
  best.attention                                      # [words, h, w]: where each word looked
"""

import dataclasses
import os
from typing import List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from nmt_tf.data import captions
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.inference.image_captioner import Captioner
from nmt_tf.inference.loading import load_models

Image = Union[str, bytes, np.ndarray]


@dataclasses.dataclass
class Caption:
  """One caption: text; score (the beam's ranking score) and log_prob (log P(words | image));
  words, the tokens, EOS last; attention [len(words), h, w], each word's weights over the
  cells of the image's annotation grid."""

  text: str
  score: float
  log_prob: float
  words: List[str]
  attention: np.ndarray


class CaptionModel:
  """A trained captioning run (model.encoder="image"), ready to caption images.

  Args:
    run_dir: the run directory.
    checkpoint: "best" (default), "last" or a checkpoint prefix.
    hard_inference: optional "expectation" or "argmax" in place of the run's
      model.hard_inference (a hard-attention run only): the context a decoding step takes.
  """

  def __init__(self, run_dir, checkpoint="best", hard_inference=None):
    model, config, _, tokenizer, self.checkpoints = load_models(
        run_dir, checkpoint, hard_inference=hard_inference)
    if config.model.encoder != "image":
      raise RunDirError(f"{run_dir} is a translation run (model.encoder="
                        f"{config.model.encoder!r}); load it with nmt_tf.load.")
    self.config = config
    self.captioner = Captioner(model, tokenizer, config.decode)
    self._searches = {}

  def _pixels(self, image):
    """float32 [size, size, 3] in [0, 1] of a path, encoded bytes or an array (uint8 pixels,
    or floats in [0, 1]); ValueError (a DataError for bytes) naming what is wrong."""
    size = self.captioner.image_size
    if isinstance(image, str):
      if not os.path.isfile(image):
        raise ValueError(f"The image {image} does not exist.")
      with open(image, "rb") as f:
        return captions.read_image(f.read(), size, image)
    if isinstance(image, (bytes, bytearray, memoryview)):
      return captions.read_image(bytes(image), size, "the image bytes")
    given = np.asarray(image)
    if given.ndim != 3 or given.shape[-1] != 3:
      raise ValueError(f"Received an image array of shape {given.shape}; expected [height, "
                       "width, 3].")
    if np.issubdtype(given.dtype, np.integer):
      if given.size and (given.min() < 0 or given.max() > 255):
        raise ValueError(f"Received an integer image array with values in [{given.min()}, "
                         f"{given.max()}]; expected uint8 pixels in [0, 255].")
      array = given.astype(np.float32) / 255.0
    elif np.issubdtype(given.dtype, np.floating):
      array = given.astype(np.float32)
      if not np.isfinite(array).all() or (array.size and (array.min() < 0.0 or
                                                          array.max() > 1.0)):
        raise ValueError(
            f"Received a float image array with values in [{np.nanmin(array):g}, "
            f"{np.nanmax(array):g}]; expected floats in [0, 1] (divide pixels in 0-255 by "
            "255, or pass them as uint8).")
    else:
      raise ValueError(f"Received an image array of dtype {given.dtype}; expected uint8 "
                       "pixels or floats in [0, 1].")
    return tf.image.resize(array, [size, size], antialias=True).numpy().clip(0.0, 1.0)

  def caption(self, images: Union[Image, Sequence[Image]], beam_size: Optional[int] = None,
              batch_size: Optional[int] = None) -> Union[Caption, List[Caption]]:
    """The best caption of each image (a path, encoded bytes, or an array [height, width, 3]
    of uint8 pixels or floats in [0, 1]); one Caption for one image, else a list in order."""
    single = isinstance(images, (str, bytes)) or (isinstance(images, np.ndarray)
                                                  and images.ndim != 4)
    items = [images] if single else list(images)
    beam_size = beam_size or self.config.decode.beam_size
    batch_size = batch_size or self.config.decode.batch_size
    search = self._searches.get(beam_size)
    if search is None:
      size = self.captioner.image_size
      spec = tf.TensorSpec([None, size, size, 3], tf.float32)
      search = self._searches[beam_size] = tf.function(
          lambda x: self.captioner.caption(x, beam_size, 1), input_signature=[spec],
          autograph=False)
    results = []
    for start in range(0, len(items), batch_size):
      pixels = np.stack([self._pixels(i) for i in items[start:start + batch_size]])
      out = search(tf.constant(pixels))
      for row in range(len(pixels)):
        length = int(out["lengths"][row, 0])
        weights = out["attention"][row, 0, :length].numpy()  # [len, h*w]
        results.append(Caption(
            text=out["caption"][row, 0].numpy().decode("utf-8"),
            score=float(out["scores"][row, 0]), log_prob=float(out["log_probs"][row, 0]),
            words=self.captioner.words(out["ids"][row, 0, :length].numpy()),
            attention=weights.reshape((length,) + tuple(self.captioner.grid))))
    return results[0] if single else results


def load_captioner(run_dir, checkpoint="best", hard_inference=None):
  """The CaptionModel of a trained captioning run."""
  return CaptionModel(run_dir, checkpoint, hard_inference)
