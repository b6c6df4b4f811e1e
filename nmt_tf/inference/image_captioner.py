"""Captions for images with a models.ImageCaptioner: greedy or beam search, in one graph.

  captioner = Captioner(model, tokenizer, decode_config)
  out = captioner.caption(images)         # images float32 [batch, size, size, 3] in [0, 1]
  out["caption"]                          # tf.string [batch, nbest]

The same search as translation (nmt_tf.decoding.decode over `model.encode/initial_state/
step`); the length limit is decode.max_length, as an image has no source length.
"""

import tensorflow as tf

from nmt_tf import decoding
from nmt_tf.data import captions as caption_data
from nmt_tf.data.tokenizer import strip_special


class Captioner:
  """Captions images (see module docstring).

  Args:
    model: a models.ImageCaptioner (encode, initial_state, step).
    tokenizer: the caption tokenizer.
    decode_config: DecodeConfig (beam_size, nbest, max_length, min_length, length_penalty).
  """

  def __init__(self, model, tokenizer, decode_config):
    self.model = model
    self.tokenizer = tokenizer
    self.decode_config = decode_config
    self.image_size = model.model_config.image_size
    self.grid = model.encoder.grid  # (h, w) of the annotation vectors

  def search(self, images, beam_size=None, nbest=None):
    """images [batch, size, size, 3] -> DecodeResult (attention [batch, nbest, len, h*w])."""
    cfg = self.decode_config
    beam_size = beam_size or cfg.beam_size
    nbest = nbest or (cfg.nbest if beam_size > 1 else 1)
    context = self.model.encode(images)
    state = self.model.initial_state(context, cfg.max_length)
    return decoding.decode(
        self.model.step, state, context, max_length=cfg.max_length, beam_size=beam_size,
        nbest=nbest, batch_size=tf.shape(images)[0], min_length=cfg.min_length,
        length_penalty=cfg.length_penalty if beam_size > 1 else 0.0, compact=cfg.compact_batch)

  def caption(self, images, beam_size=None, nbest=None):
    """images [batch, size, size, 3] -> dict: caption tf.string [batch, nbest], ids, lengths,
    log_probs, scores, attention [batch, nbest, max_len, h*w]."""
    result = self.search(images, beam_size, nbest)
    batch, n = tf.shape(result.ids)[0], tf.shape(result.ids)[1]
    flat = tf.reshape(result.ids, [batch * n, -1])  # [batch*nbest, max_len]
    words = self.tokenizer.detokenize(strip_special(flat))  # [batch*nbest]
    return {"caption": tf.reshape(words, [batch, n]), "ids": result.ids,
            "lengths": result.lengths, "log_probs": result.log_probs,
            "scores": result.scores, "attention": result.attention}

  def caption_bytes(self, data, beam_size=None, nbest=None):
    """Encoded images (JPEG, PNG, GIF or BMP) tf.string [batch] -> the dict of `caption`."""
    images = tf.map_fn(lambda d: caption_data.decode_image(d, self.image_size), data,
                       fn_output_signature=tf.TensorSpec(
                           [self.image_size, self.image_size, 3], tf.float32))
    return self.caption(images, beam_size, nbest)

  def words(self, ids):
    """Token strings of ids [len] (numpy or tensor), for heat-map labels."""
    return [t.decode("utf-8", "replace") for t in
            self.tokenizer.id_to_token(tf.constant(ids, tf.int32)).numpy()]
