"""Vocabularies of a fine-tuned run on a new corpus: `nmt-tf train --init_from=RUN
--update_vocab=merge|replace`, as OpenNMT-tf's `update_vocab`.

New tokenizers are trained on the new corpus with the parent's tokenizer settings; then

  merge     the parent's tokens keep their ids, the new corpus's tokens the parent lacks
            are appended (`Tokenizer.extended`: for SentencePiece, a model with the pieces of
            both, each with its own score);
  replace   the new corpus's vocabulary alone: the parent's tokens it lacks are dropped.

`row_map` pairs each token of the new vocabulary with the parent's id of the same surface
string (or -1): the embedding and output rows of a kept token are the parent's
(models/vocab_rows.py), a new token's rows are initialised as at the start of training.
"""

from typing import Sequence, Tuple

import numpy as np

from nmt_tf.data.tokenizer import Tokenizer
from nmt_tf.data.tokenizer_pair import TokenizerConfig, train_tokenizers

MODES = ("merge", "replace")


def update_tokenizers(mode: str, source: Tokenizer, target: Tokenizer,
                      config: TokenizerConfig, train_split,
                      symbols: Sequence[str] = ()) -> Tuple[Tokenizer, Tokenizer]:
  """The (source, target) tokenizers of a run fine-tuned on `train_split` from a parent with
  tokenizers `source` and `target` (the same object when shared, and so are the results).

  Args:
    mode: "merge" or "replace" (module docstring).
    config: the parent's tokenizer settings, which the new tokenizers are trained with.
    train_split: the new training split (any split `train_tokenizers` takes).
    symbols: source tokens kept whole (`train_tokenizers`), e.g. target-language tags.
  """
  if mode not in MODES:
    raise ValueError(f"Received update_vocab={mode!r}; expected one of {MODES}.")
  new_source, new_target = train_tokenizers(config, train_split, symbols)
  if mode == "replace":
    return new_source, new_target
  if source is target:
    shared = source.extended(new_source)
    return shared, shared
  return source.extended(new_source), target.extended(new_target)


def row_map(old: Tokenizer, new: Tokenizer) -> np.ndarray:
  """int64 [new.vocab_size]: the id in `old` of each token of `new` (same surface string),
  -1 for a token `old` lacks. The reserved tokens map to themselves."""
  index = {token: i for i, token in enumerate(old.vocab)}
  return np.array([index.get(token, -1) for token in new.vocab], np.int64)
