"""The tf.Module whose signatures TF Serving runs: raw strings in, translations out.

Six signatures, all string-in and tokenized inside the graph (docs/EXPORT.md):
  serving_default     greedy search (Translator.translate with beam_size=1);
  beam_search         beam search with the beam size and n-best size fixed at export;
  prefix              greedy search that continues a typed target prefix (interactive
                      translation; a prefix not ending with a space has its last word
                      completed);
  beam_search_prefix  beam search that continues a typed target prefix;
  beam_search_constrained  lexically constrained beam search: `constraints` holds each
                      sentence's target phrases joined by tabs ("" = none), and every
                      phrase appears in the translation;
  score               log P(y | x) of given (source, target) pairs, teacher-forced
                      (docs/EQUATIONS.md "Training objective": sum_t log p(y_t | y_<t, x),
                      EOS included).
The searches also answer each piece's log-probability and the translation's words with
theirs (word-level confidence, nmt_tf/inference/confidence.py). TF Serving has no optional
inputs, hence separate signatures for a prefix and for constraints. A model trained with
target-language tags (data/target_tags.py) takes one more input in every signature,
`target_lang` [batch] ("fr"): each source is read with the tag of its language, and a
language the model lacks fails the request with an InvalidArgumentError naming those it has.

Guarding the server: a `score` request with a different number of sources and targets fails
with an InvalidArgumentError that says so; every input is transcoded UTF-8 -> UTF-8 with invalid bytes replaced by
U+FFFD before tokenizing; sources longer than `max_source_length` tokens are cut (flag
`truncated`); an input with no token (empty or blank) gets an empty translation with
log_prob 0 and length 0. An empty batch (`[0]` strings) skips the model: every output key
is there, with batch dimension 0 and the dtypes of a non-empty batch (`empty_outputs`).
"""

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.inference import confidence

SIGNATURES = ("serving_default", "beam_search", "prefix", "beam_search_prefix",
              "beam_search_constrained", "score")
_TEXT = tf.TensorSpec([None], tf.string, name="text")
_PREFIX = tf.TensorSpec([None], tf.string, name="prefix")
_CONSTRAINTS = tf.TensorSpec([None], tf.string, name="constraints")
_SOURCE = tf.TensorSpec([None], tf.string, name="source")
_TARGET = tf.TensorSpec([None], tf.string, name="target")
_TARGET_LANG = tf.TensorSpec([None], tf.string, name="target_lang")

# Outputs of each signature: {key: (dtype, shape after the batch axis)}; "nbest" stands for
# the n-best size and 0 for a length (token strings, alignments) that an empty batch lacks.
_GREEDY_OUTPUTS = {
    "translation": (tf.string, []), "log_prob": (tf.float32, []),
    "source_tokens": (tf.string, [0]), "source_length": (tf.int32, []),
    "target_tokens": (tf.string, [0]), "target_length": (tf.int32, []),
    "alignment": (tf.float32, [0, 0]), "truncated": (tf.bool, []),
    "token_log_prob": (tf.float32, [0]), "words": (tf.string, [0]),
    "word_log_prob": (tf.float32, [0]), "word_count": (tf.int32, []),
}
_BEAM_OUTPUTS = {
    "translation": (tf.string, ["nbest"]), "log_prob": (tf.float32, ["nbest"]),
    "score": (tf.float32, ["nbest"]),
    "source_tokens": (tf.string, [0]), "source_length": (tf.int32, []),
    "target_tokens": (tf.string, ["nbest", 0]), "target_length": (tf.int32, ["nbest"]),
    "alignment": (tf.float32, ["nbest", 0, 0]), "truncated": (tf.bool, []),
    "token_log_prob": (tf.float32, ["nbest", 0]), "words": (tf.string, ["nbest", 0]),
    "word_log_prob": (tf.float32, ["nbest", 0]), "word_count": (tf.int32, ["nbest"]),
}
OUTPUTS = {
    "serving_default": _GREEDY_OUTPUTS,
    "beam_search": _BEAM_OUTPUTS,
    "prefix": _GREEDY_OUTPUTS,
    "beam_search_prefix": _BEAM_OUTPUTS,
    "beam_search_constrained": _BEAM_OUTPUTS,
    "score": {
        "log_prob": (tf.float32, []), "token_log_prob": (tf.float32, [0]),
        "target_length": (tf.int32, []), "truncated": (tf.bool, []),
    },
}


def empty_outputs(signature, nbest):
  """The outputs of `signature` for an empty batch: {key: zeros of shape [0, ...]}, with
  `nbest` for the n-best axis (see OUTPUTS)."""
  return {key: tf.zeros([0] + [nbest if d == "nbest" else d for d in dims], dtype)
          for key, (dtype, dims) in OUTPUTS[signature].items()}


def unless_empty(inputs, signature, nbest, outputs_fn):
  """outputs_fn() when one of `inputs` ([batch] tensors) has an element, else the empty
  outputs of `signature`.

  One tf.cond around the whole computation: a non-empty batch runs the graph it ran without
  it (no per-step work is added) and an empty one never reaches ops that need a row.
  """
  size = tf.add_n([tf.size(x) for x in inputs])
  return tf.cond(size > 0, outputs_fn, lambda: empty_outputs(signature, nbest))


def clean_text(text):
  """tf.string [batch] -> [batch] valid UTF-8 (invalid bytes -> U+FFFD), so tokenizers and
  detokenizers never see malformed input."""
  return tf.strings.unicode_transcode(text, input_encoding="UTF-8", output_encoding="UTF-8",
                                      errors="replace", replacement_char=0xFFFD)


class ServingModule(tf.Module):
  """Serving signatures over a Translator (nmt_tf/inference/translator.py).

  Args:
    translator: a Translator; its model, tokenizers and decode config are exported.
    beam_size: beam of the `beam_search` signature (python int >= 1).
    nbest: hypotheses returned by `beam_search` (1 <= nbest <= beam_size).
  """

  def __init__(self, translator, beam_size, nbest, name=None):
    super().__init__(name=name)
    if not (isinstance(beam_size, int) and beam_size >= 1):
      raise ValueError(f"Received beam_size={beam_size!r}; expected a positive integer.")
    if not (isinstance(nbest, int) and 1 <= nbest <= beam_size):
      raise ValueError(f"Received nbest={nbest!r}; expected an integer in [1, "
                       f"beam_size={beam_size}].")
    self.translator = translator
    self.target_languages = translator.target_languages
    self.beam_size = beam_size
    self.nbest = nbest
    self.max_target_length = translator.decode_config.max_length

  def source(self, text, target_lang=None):
    """text [batch] as the model reads it: valid UTF-8, tagged with `target_lang` [batch]
    when the model has target-language tags."""
    text = clean_text(text)
    if target_lang is None:
      return text
    return self.translator.tag_texts(text, clean_text(target_lang))

  def greedy(self, text, prefix=None, target_lang=None):
    """text [batch] -> dict (see docs/EXPORT.md): translation [batch], log_prob [batch],
    source_tokens [batch, src_len], source_length [batch], target_tokens [batch, tgt_len],
    target_length [batch], alignment [batch, tgt_len, src_len], truncated [batch],
    token_log_prob [batch, tgt_len], words [batch, n_words], word_log_prob [batch,
    n_words], word_count [batch]. `prefix`: optional [batch], the start of each
    translation ("" = none); `target_lang`: [batch], for a model with target-language tags."""
    result = self.translator.translate(self.source(text, target_lang), beam_size=1, nbest=1,
                                       prefix=None if prefix is None else clean_text(prefix))
    outputs = self._outputs(result)
    for key in ("translation", "log_prob", "target_tokens", "target_length", "alignment",
                "token_log_prob", "words", "word_log_prob", "word_count"):
      outputs[key] = outputs[key][:, 0]  # drop the n-best axis of size 1
    del outputs["score"]  # equal to log_prob without a beam
    return outputs

  def beam(self, text, prefix=None, constraints=None, target_lang=None):
    """text [batch] -> dict: as `greedy` with an n-best axis after the batch axis
    (translation [batch, nbest], log_prob, score [batch, nbest], target_tokens
    [batch, nbest, tgt_len], target_length, alignment [batch, nbest, tgt_len, src_len], ...),
    sorted by decreasing score; missing hypotheses have score -inf and length 0.
    `constraints`: optional [batch], each translation's required phrases joined by tabs."""
    result = self.translator.translate(
        self.source(text, target_lang), beam_size=self.beam_size, nbest=self.nbest,
        prefix=None if prefix is None else clean_text(prefix),
        constraints=None if constraints is None else clean_text(constraints))
    return self._outputs(result)

  def score(self, source, target, target_lang=None):
    """(source [batch], target [batch]) -> dict: log_prob [batch] = log P(target | source),
    token_log_prob [batch, tgt_len] (EOS last, 0 after), target_length [batch] (EOS
    included), truncated [batch] (source or target cut)."""
    return self.translator.score(self.source(source, target_lang), clean_text(target),
                                 self.max_target_length)

  def signatures(self):
    """{signature name: tf.function} for tf.saved_model.save; an empty batch gives
    `empty_outputs` without running the model.

    The tf.functions are not attributes of the module: tf.saved_model.save would trace every
    tracked tf.function again (beam search takes seconds to trace).
    """
    lang = [_TARGET_LANG] if self.target_languages else []

    def checked(name, inputs, outputs_fn, *pairs):
      """outputs_fn() after the checks that `pairs` of inputs have the same size."""
      nbest = self.nbest if name.startswith("beam_search") else 1
      with tf.control_dependencies([_same_size(a, b, name, what) for a, b, what in pairs]):
        return unless_empty(inputs, name, nbest, outputs_fn)

    def langs(text, target_lang):
      return [] if target_lang is None else [(text, target_lang, "target_lang")]

    def serving_default(text, target_lang=None):
      return checked("serving_default", [text],
                     lambda: self.greedy(text, target_lang=target_lang),
                     *langs(text, target_lang))

    def beam_search(text, target_lang=None):
      return checked("beam_search", [text], lambda: self.beam(text, target_lang=target_lang),
                     *langs(text, target_lang))

    def prefix(text, prefix, target_lang=None):
      return checked("prefix", [text],
                     lambda: self.greedy(text, prefix, target_lang=target_lang),
                     (text, prefix, "prefix"), *langs(text, target_lang))

    def beam_search_prefix(text, prefix, target_lang=None):
      return checked("beam_search_prefix", [text],
                     lambda: self.beam(text, prefix, target_lang=target_lang),
                     (text, prefix, "prefix"), *langs(text, target_lang))

    def beam_search_constrained(text, constraints, target_lang=None):
      return checked("beam_search_constrained", [text],
                     lambda: self.beam(text, constraints=constraints, target_lang=target_lang),
                     (text, constraints, "constraints"),
                     *langs(text, target_lang))

    def score(source, target, target_lang=None):
      check = tf.debugging.assert_equal(
          tf.size(source), tf.size(target), message="score: the request has a different "
          "number of sources and targets; send one target per source")
      with tf.control_dependencies([check]):
        return checked("score", [source, target],
                       lambda: self.score(source, target, target_lang),
                       *langs(source, target_lang))

    function = lambda fn, *specs: tf.function(fn, input_signature=list(specs) + lang,  # pylint: disable=g-long-lambda
                                              autograph=False)
    return {
        "serving_default": function(serving_default, _TEXT),
        "beam_search": function(beam_search, _TEXT),
        "prefix": function(prefix, _TEXT, _PREFIX),
        "beam_search_prefix": function(beam_search_prefix, _TEXT, _PREFIX),
        "beam_search_constrained": function(beam_search_constrained, _TEXT, _CONSTRAINTS),
        "score": function(score, _SOURCE, _TARGET),
    }

  def _outputs(self, result):
    """Translator.translate's dict -> the serving outputs with an n-best axis.

    Inputs without any token get empty outputs; token strings and alignments are cut to the
    longest hypothesis of the batch and padded with "" and 0.
    """
    source = result["source"]  # [batch, src_len]
    source_mask = source != special_tokens.PAD_ID
    source_length = tf.reduce_sum(tf.cast(source_mask, tf.int32), axis=1)  # [batch]
    empty = source_length <= 1  # only EOS: no token in the input
    empty_n = tf.broadcast_to(empty[:, None], tf.shape(result["lengths"]))  # [batch, nbest]
    lengths = tf.where(empty_n, 0, result["lengths"])  # [batch, nbest]
    width = tf.maximum(tf.reduce_max(lengths), 0)  # reduce_max of an empty batch is -inf
    ids = result["ids"][:, :, :width]  # [batch, nbest, width]
    target_mask = tf.range(width)[None, None, :] < lengths[:, :, None]
    alignment = result["attention"][:, :, :width, :]  # [batch, nbest, width, src_len]
    alignment *= tf.cast(target_mask, alignment.dtype)[..., None]
    # An empty input has one hypothesis, the empty one (log_prob 0); the rest are missing.
    first = tf.range(tf.shape(lengths)[1])[None, :] == 0  # [1, nbest]
    empty_value = tf.where(first, 0.0, float("-inf")) * tf.ones_like(result["log_probs"])
    target_tokens = tf.where(target_mask, self.translator.target_tokenizer.id_to_token(ids), "")
    token_log_prob = tf.where(target_mask, result["token_log_probs"][:, :, :width], 0.0)
    words, word_log_prob, word_count = confidence.word_tensors(
        target_tokens, token_log_prob, lengths, self.translator.target_tokenizer.joins_pieces)
    return {
        "translation": tf.where(empty_n, "", result["translation"]),
        "log_prob": tf.where(empty_n, empty_value, result["log_probs"]),
        "score": tf.where(empty_n, empty_value, result["scores"]),
        "source_tokens": tf.where(
            source_mask, self.translator.source_tokenizer.id_to_token(source), ""),
        "source_length": source_length,
        "target_tokens": target_tokens,
        "target_length": lengths,
        "alignment": alignment,
        "truncated": result["truncated"],
        "token_log_prob": token_log_prob,
        "words": words,
        "word_log_prob": word_log_prob,
        "word_count": word_count,
    }


def _same_size(text, other, signature, name="prefix"):
  """An assertion that a request gives one `name` input per text."""
  none = "" if name == "target_lang" else ' ("" for none)'
  return tf.debugging.assert_equal(
      tf.size(text), tf.size(other), message=f"{signature}: the request has a different "
      f"number of texts and {name} values; send one {name} value per text{none}")
