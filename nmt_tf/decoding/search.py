"""One entry point for every search strategy."""

import tensorflow as tf

from nmt_tf.decoding.beam import beam_search
from nmt_tf.decoding.greedy import greedy_search


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
