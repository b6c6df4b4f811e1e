"""Text in, translations or scores out: tokenizers + model + search in one tf.Module.

The same graph code serves validation BLEU, `run.py translate`, `run.py evaluate`, `run.py
score` and the exported SavedModel: `encode_source` from the data pipeline,
`model.encode/initial_state/step` and `nmt_tf.decoding.decode`, then in-graph detokenization
(`translate`); or one teacher-forced forward pass for given translations (`score`, forced
decoding: log P(y | x) = sum_{t=1}^{n+1} log p(y_t | y_<t, x) with y_{n+1} = EOS,
docs/EQUATIONS.md "Training objective").
"""

import tensorflow as tf

from nmt_tf import cpu
from nmt_tf import decoding
from nmt_tf import special_tokens
from nmt_tf.data import add_bos_eos, encode_source, strip_special
from nmt_tf.data import target_tags
from nmt_tf.inference import target_prefix as target_prefix_lib
from nmt_tf.layers import kernels

# Between the phrases of one sentence's constraints in a tf.string (the serving signatures').
CONSTRAINT_SEPARATOR = "\t"


def token_log_probs(model, source, target_in, target_out):
  """log p(y_t | y_<t, x) of each target token, from ONE teacher-forced forward pass.

  Args:
    model: callable({"source", "target_in"}) -> dict with "logits" [batch, tgt_len, vocab]
      (a Seq2Seq or a ModelEnsemble).
    source: int32 [batch, src_len] (EOS last, PAD=0).
    target_in: int32 [batch, tgt_len]: BOS y_1 .. y_n, PAD after.
    target_out: int32 [batch, tgt_len]: y_1 .. y_n EOS, PAD after.

  Returns:
    float32 [batch, tgt_len], 0 at padding.
  """
  logits = model({"source": source, "target_in": target_in}, training=False)["logits"]
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [b, tgt, vocab]
  picked = tf.gather(log_probs, target_out, batch_dims=2)  # [batch, tgt_len]
  return tf.where(tf.equal(target_out, special_tokens.PAD_ID), 0.0, picked)


class Translator(tf.Module):
  """Translates raw strings with a model and its tokenizers.

  Args:
    model: a Seq2Seq (anything with encode, initial_state and step).
    source_tokenizer, target_tokenizer: nmt_tf.data tokenizers.
    decode_config: nmt_tf.experiment.DecodeConfig (beam size, penalties, lengths).
    max_source_length: longer inputs are cut to this many tokens (EOS excluded) and flagged.
    shortlist: optional `inference.shortlist.Shortlist`: the searches score only its
      vocabulary of each batch (decode.shortlist).
    target_languages: the target languages of a model trained with target-language tags
      (data/target_tags.py), whose sources `tag` and `tag_texts` start with the tag of the
      language asked for; () for a model without tags.
  """

  def __init__(self, model, source_tokenizer, target_tokenizer, decode_config,
               max_source_length=200, shortlist=None, target_languages=(), name=None):
    super().__init__(name=name)
    self.target_languages = tuple(target_languages)
    self.shortlist = shortlist
    self.model = model
    self.source_tokenizer = source_tokenizer
    self.target_tokenizer = target_tokenizer
    self.decode_config = decode_config
    self.max_source_length = max_source_length
    # decode.precision=auto decided once, for this machine; `precision_reason` says why.
    self.precision, self.precision_reason = cpu.resolve_precision(
        decode_config.precision, gpus=tf.config.list_physical_devices("GPU"))

  def tag(self, lines, target_lang=None):
    """Python source lines as the model reads them: for a tagged model each non-blank line
    starts with the tag of `target_lang` ("<2fr> ..."); unchanged for a model without tags.

    Raises:
      TargetLanguageError: `target_lang` is not one of the model's target languages (or
        missing for a tagged model, or given for a model without tags).
    """
    target_tags.check_language(target_lang, self.target_languages)
    if not self.target_languages:
      return list(lines)
    return [target_tags.tagged(line, target_lang) if line.strip() else line for line in lines]

  def tag_texts(self, text, target_lang):
    """`tag` in the graph: text tf.string [batch], target_lang tf.string [batch] -> [batch];
    an InvalidArgumentError for a language the model does not have. A blank text stays as
    it is (an empty translation)."""
    tagged = target_tags.tag_in_graph(text, target_lang, self.target_languages)
    return tf.where(tf.strings.strip(text) == "", text, tagged)

  def source_ids(self, text):
    """text tf.string [batch] -> (ids [batch, src_len] padded with 0 and ending in EOS,
    truncated [batch] bool)."""
    ragged = encode_source(self.source_tokenizer, text)  # [batch, (len + 1)]
    truncated = ragged.row_lengths() > self.max_source_length + 1  # [batch]
    ragged = _cut(ragged, self.max_source_length)  # [batch, (<= max_source_length + 1)]
    return tf.cast(ragged.to_tensor(), tf.int32), truncated

  def target_ids(self, text, max_length=None):
    """text tf.string [batch] -> (target_in [batch, len] BOS y_1..y_n, target_out [batch, len]
    y_1..y_n EOS, both padded with 0; truncated [batch] bool). With `max_length`, targets are
    cut to max_length - 1 tokens (EOS takes the last position) and flagged."""
    ragged = self.target_tokenizer.tokenize(text)  # [batch, (n)]
    if max_length is None:
      truncated = tf.zeros([ragged.nrows()], tf.bool)
    else:
      truncated = ragged.row_lengths() > max_length - 1  # [batch]
      ragged = ragged[:, :max_length - 1]
    target_in, target_out = add_bos_eos(ragged)
    return (tf.cast(target_in.to_tensor(), tf.int32), tf.cast(target_out.to_tensor(), tf.int32),
            truncated)

  def score(self, source_text, target_text, max_target_length=None):
    """Forced decoding of given translations (see module docstring).

    Args:
      source_text, target_text: tf.string [batch] each.
      max_target_length: cut longer targets (see `target_ids`); None keeps them whole.

    Returns:
      dict: log_prob [batch] = log P(target | source), token_log_prob [batch, tgt_len] (EOS
      last, 0 after), target_length [batch] (EOS included), truncated [batch] (source or
      target cut).
    """
    source, source_cut = self.source_ids(source_text)  # [batch, src_len]
    target_in, target_out, target_cut = self.target_ids(target_text, max_target_length)
    token_log_prob = token_log_probs(self.model, source, target_in, target_out)
    return {
        "log_prob": tf.reduce_sum(token_log_prob, axis=1),
        "token_log_prob": token_log_prob,
        "target_length": tf.reduce_sum(tf.cast(target_out != special_tokens.PAD_ID, tf.int32),
                                       axis=1),
        "truncated": tf.logical_or(source_cut, target_cut),
    }

  @property
  def max_prefix_pieces(self):
    """The most target pieces a prefix may hold: one step is left for EOS."""
    return self.decode_config.max_length - 1

  def prefix(self, text):
    """text tf.string [batch], the start of each translation ("" = none) -> (Prefix, cut
    [batch] bool); see `target_prefix`."""
    return target_prefix_lib.target_prefix(self.target_tokenizer, text, self.max_prefix_pieces)

  def as_typed(self, prefix, text):
    """Translations text tf.string [batch, nbest] that start with their prefix [batch] as
    typed (see `target_prefix.as_typed`)."""
    return target_prefix_lib.as_typed(self.target_tokenizer, prefix, text)

  def check_prefix(self, lines, name="prefix"):
    """Raises ValueError naming (`name` and its number) the first of the python strings
    `lines` whose prefix has more pieces than the search can hold (decode.max_length)."""
    for i, line in enumerate(lines):
      count = len(self.target_tokenizer.encode(line)) if line else 0
      if count > self.max_prefix_pieces:
        raise ValueError(f"{name} {i + 1} has {count} target pieces; decode.max_length="
                         f"{self.decode_config.max_length} holds at most "
                         f"{self.max_prefix_pieces} and EOS (raise decode.max_length).")

  def constraints(self, text):
    """text tf.string [batch]: the phrases each translation must contain, joined by tabs
    ("" = none) -> `decoding.Constraints` of the target tokens of every phrase."""
    phrases = tf.strings.split(text, sep=CONSTRAINT_SEPARATOR)  # [batch, (phrases)]
    phrases = tf.ragged.boolean_mask(phrases, tf.strings.strip(phrases) != "")
    tokens = tf.cast(self.target_tokenizer.tokenize(phrases.flat_values), tf.int32)
    position = tf.ragged.range(tokens.row_lengths())  # [phrases, (tokens)]
    continues = position < tf.expand_dims(tokens.row_lengths() - 1, 1)
    per_sentence = tf.math.unsorted_segment_sum(  # tokens per sentence [batch]
        tokens.row_lengths(), phrases.value_rowids(), phrases.nrows())
    ids = tf.RaggedTensor.from_row_lengths(tokens.flat_values, per_sentence)
    continues = tf.RaggedTensor.from_row_lengths(continues.flat_values, per_sentence)
    return decoding.Constraints(ids.to_tensor(), continues.to_tensor(False))

  def check_constraints(self, sentences, name="sentence"):
    """Raises ValueError naming (`name` and its number) the first sentence of `sentences`
    (python lists of phrases) with a phrase that is not a non-empty str, holds a tab or
    characters the target vocabulary lacks, or whose phrases do not fit decode.max_length."""
    tokenizer = self.target_tokenizer
    for i, phrases in enumerate(sentences):
      total = 0
      for phrase in phrases:
        if not isinstance(phrase, str) or not phrase.strip():
          raise ValueError(f"{name} {i + 1}: constraint {phrase!r} is not a non-empty "
                           "string; give each phrase as a string.")
        if CONSTRAINT_SEPARATOR in phrase:
          raise ValueError(f"{name} {i + 1}: constraint {phrase!r} holds a tab; give each "
                           "phrase as its own string.")
        ids = tokenizer.encode(phrase)
        if special_tokens.UNK_ID in ids:
          raise ValueError(f"{name} {i + 1}: constraint {phrase!r} has characters or words "
                           "the target vocabulary lacks, which no translation can contain; "
                           "spell it with the vocabulary's words or drop it.")
        total += len(ids)
      if total + 1 > self.decode_config.max_length:
        raise ValueError(f"{name} {i + 1}: its constraints have {total} target pieces, which "
                         f"with EOS do not fit decode.max_length="
                         f"{self.decode_config.max_length}; drop some or raise "
                         "decode.max_length.")

  def translate_ids(self, source, beam_size=None, nbest=None, compact=None, prefix=None,
                    constraints=None):
    """source [batch, src_len] ids -> DecodeResult (ids [batch, nbest, max_len], ...).
    `compact` (None = decode.compact_batch): drop finished sentences from the search's batch,
    which leaves its shapes dynamic (False for XLA and LiteRT). `prefix`: an optional
    `decoding.Prefix` that each translation starts with (see `prefix`). `constraints`: an
    optional `decoding.Constraints`, phrases each translation contains (see `constraints`;
    the search is then lexically constrained beam search, also with beam_size 1)."""
    cfg = self.decode_config
    beam_size = beam_size or cfg.beam_size
    nbest = nbest or (cfg.nbest if beam_size > 1 else 1)
    # The model's own (its training precision) first; an ensemble has none.
    dtype = getattr(self.model, "matmul_dtype", None) or kernels.matmul_dtype_for(self.precision)
    with kernels.precision_scope(dtype, prefetch=self.model.trainable_variables):
      return self._search(source, cfg, beam_size, nbest,
                          cfg.compact_batch if compact is None else compact, prefix,
                          constraints)

  def _search(self, source, cfg, beam_size, nbest, compact, prefix=None, constraints=None):
    vocab = (None if self.shortlist is None else
             self.shortlist.vocabulary(source, prefix, constraints))  # [n]
    return decoding.decode_model(
        self.model, source, max_length=cfg.max_length, beam_size=beam_size, nbest=nbest,
        vocab=vocab, prefix=prefix, lexical_constraints=constraints,
        length_penalty=cfg.length_penalty, coverage_penalty=cfg.coverage_penalty,
        max_length_a=cfg.max_length_a, max_length_b=cfg.max_length_b,
        min_length=cfg.min_length, compact=compact)

  def translate(self, text, beam_size=None, nbest=None, prefix=None, constraints=None):
    """text tf.string [batch] -> dict: translation [batch, nbest] tf.string, ids, lengths,
    log_probs, scores, attention [batch, nbest, max_len, src_len], token_log_probs
    [batch, nbest, max_len], source ids, truncated (the source or the prefix was cut).
    `prefix`: optional tf.string [batch], the start of each translation ("" = none).
    `constraints`: optional tf.string [batch], the phrases each translation must contain,
    joined by tabs ("" = none)."""
    source, truncated = self.source_ids(text)
    target_prefix = None
    if prefix is not None:
      target_prefix, cut = self.prefix(prefix)
      truncated = tf.logical_or(truncated, cut)
    result = self.translate_ids(
        source, beam_size, nbest, prefix=target_prefix,
        constraints=None if constraints is None else self.constraints(constraints))
    batch, n = tf.shape(result.ids)[0], tf.shape(result.ids)[1]
    flat_ids = tf.reshape(result.ids, [batch * n, -1])  # [batch*nbest, max_len]
    words = self.target_tokenizer.detokenize(strip_special(flat_ids))  # [batch*nbest]
    words = tf.reshape(words, [batch, n])
    if prefix is not None:
      words = self.as_typed(prefix, words)
    return {
        "translation": words,
        "ids": result.ids,
        "lengths": result.lengths,
        "log_probs": result.log_probs,
        "scores": result.scores,
        "attention": result.attention,
        "token_log_probs": result.token_log_probs,
        "source": source,
        "truncated": truncated,
    }


def _cut(ragged, max_tokens):
  """Keeps at most max_tokens tokens and the final EOS of each row of ragged [batch, (len)]
  (every row ends with EOS)."""
  head = ragged[:, :-1][:, :max_tokens]  # [batch, (keep)]
  return tf.concat([head, ragged[:, -1:]], axis=1)  # [batch, (keep + 1)]
