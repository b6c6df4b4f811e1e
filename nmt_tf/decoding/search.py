"""One entry point for every search strategy (`decode`), and the search of a model's
decoding interface (`decode_model`)."""

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf.decoding.beam import beam_search
from nmt_tf.decoding.greedy import greedy_search
from nmt_tf.decoding.lexical import Constraints
from nmt_tf.decoding.prefix import Prefix


def decode(step_fn, state, context, *, max_length, beam_size=1, nbest=1, batch_size=None,
           src_length=None, max_length_a=None, max_length_b=0.0, min_length=0,
           length_penalty=0.0, coverage_penalty=0.0, compact=False, prefix=None,
           lexical_constraints=None):
  """Decodes with greedy search (beam_size = 1) or beam search (beam_size > 1).

  Both strategies return the same `DecodeResult`, so callers (translation, evaluation,
  export) have one interface. See `beam_search` for the arguments.

  Args:
    step_fn: `step_fn(ids, state, context, time) -> (logits, attention, new_state)`.
    state: nested structure of tensors [batch, ...].
    context: nested structure of tensors [batch, ...], constant while decoding.
    max_length: static python int: maximum number of tokens, EOS included.
    beam_size: python int >= 1; 1 selects greedy search.
    nbest: python int in [1, beam_size].
    batch_size: python int or scalar tensor; by default the leading dim of the first
      tensor of `context`.
    src_length: optional int32 [batch] source lengths.
    max_length_a: optional per-sentence limit `a * src_length + b` (EOS included).
    max_length_b: offset of the per-sentence limit.
    min_length: minimum number of tokens before EOS.
    length_penalty: GNMT alpha.
    coverage_penalty: GNMT beta.
    compact: drop finished sentences from the steps' batch (see `greedy_search`).
    prefix: optional `nmt_tf.decoding.prefix.Prefix`: the forced start of each translation.
    lexical_constraints: optional `nmt_tf.decoding.lexical.Constraints`: phrases each
      translation must contain; the search is then a beam search, also with beam_size 1.

  Returns:
    A `DecodeResult`.

  Raises:
    ValueError: on invalid python arguments.
  """
  if batch_size is None:
    flat = tf.nest.flatten(context)
    if not flat:
      raise ValueError("Received an empty context and batch_size=None; expected "
                       "batch_size to be given.")
    first = tf.convert_to_tensor(flat[0])
    batch_size = first.shape[0] if first.shape[0] is not None else tf.shape(first)[0]
  options = dict(src_length=src_length, max_length_a=max_length_a,
                 max_length_b=max_length_b, min_length=min_length,
                 length_penalty=length_penalty, coverage_penalty=coverage_penalty,
                 prefix=prefix)
  if beam_size == 1 and nbest == 1 and lexical_constraints is None:
    return greedy_search(step_fn, state, context, batch_size, max_length, compact=compact,
                         **options)
  return beam_search(step_fn, state, context, batch_size, beam_size, max_length,
                     nbest=nbest, compact=compact, lexical_constraints=lexical_constraints,
                     **options)


def decode_model(model, source, *, max_length, beam_size=1, nbest=1, vocab=None, prefix=None,
                 lexical_constraints=None, length_penalty=0.0, coverage_penalty=0.0,
                 **options):
  """Translates source ids with `model`'s decoding interface: `model.encode(source)` gives
  the context, `model.initial_state(context, max_length)` the state, and `model.step` is
  the step of `decode` (what `model.generate`, the Translator and the exports run).

  Args:
    model: a `Seq2Seq` or anything with its `encode`, `initial_state` and `step`.
    source: int32 [batch, src_len] ids, PAD (0) after EOS.
    max_length, beam_size, nbest, prefix, lexical_constraints: see `decode`.
    vocab: optional int32 [n], a shortlist of target ids: the search sees positions in it
      (the prefix and the constraints are mapped to them), the model scores those words
      only, and the result holds target ids again.
    length_penalty, coverage_penalty: GNMT alpha and beta, applied when hypotheses are
      ranked (beam search, and constrained search of any beam size); greedy ranks nothing.
    **options: the other keyword arguments of `decode` (min_length, max_length_a,
      max_length_b, compact).

  Returns:
    A `DecodeResult`.
  """
  context = model.encode(source)
  state = model.initial_state(context, max_length)
  src_length = tf.reduce_sum(tf.cast(source != special_tokens.PAD_ID, tf.int32), axis=1)
  step = model.step
  if vocab is not None:
    # The search sees positions in the shortlist V' [n]; the model, their words.
    positions = lambda ids: tf.searchsorted(  # pylint: disable=g-long-lambda
        tf.tile(vocab[tf.newaxis], [tf.shape(ids)[0], 1]), ids)
    if lexical_constraints is not None:
      lexical_constraints = Constraints(positions(lexical_constraints.ids),
                                        lexical_constraints.continues)
    if prefix is not None:
      prefix = Prefix(positions(prefix.ids), prefix.lengths,
                      tf.gather(prefix.completion, vocab, axis=2), prefix.stem_bytes,
                      tf.gather(prefix.piece_bytes, vocab))
    step = lambda ids, state, context, time: model.step(  # pylint: disable=g-long-lambda
        tf.gather(vocab, ids), state, context, time, vocab=vocab)
  ranked = beam_size > 1 or lexical_constraints is not None
  result = decode(step, state, context, max_length=max_length, beam_size=beam_size,
                  nbest=nbest, batch_size=tf.shape(source)[0], src_length=src_length,
                  length_penalty=length_penalty if ranked else 0.0,
                  coverage_penalty=coverage_penalty if ranked else 0.0, prefix=prefix,
                  lexical_constraints=lexical_constraints, **options)
  if vocab is not None:
    result = result._replace(ids=tf.gather(vocab, result.ids))  # PAD stays 0
  return result
