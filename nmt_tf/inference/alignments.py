"""Word alignments and UNK replacement read off the attention weights.

* Soft alignment: the attention matrix alpha [target tokens, source tokens] itself
  (Bahdanau et al. 2015, Sec. 5.2.1 and Fig. 3).
* Hard alignment: each target token is linked to its most-attended source token,
  j -> argmax_i alpha[j, i], written in the Pharaoh format `i-j` (source index - target
  index, 0-based, EOS tokens excluded); a target token whose argmax is the source EOS gets
  no link.
* UNK replacement (Luong et al. 2015, "Addressing the rare word problem", here with the
  attention as the alignment model, as in Jean et al. 2015): every UNK emitted is replaced
  by the source word it attends to most (argmax over the real source words, EOS excluded).
* Agreement of two models' alignments: the share of target tokens whose argmax lies within
  one source token of the other model's (how diagonal hard attention is against soft).
"""


import numpy as np

from nmt_tf import special_tokens
from nmt_tf.data import WordTokenizer
from nmt_tf.data.word_tokenizer import split_words


def source_tokens(tokenizer, text, num_real):
  """The `num_real` first source tokens of `text` as strings, then EOS.

  For word vocabularies these are the words as written (also those out of the vocabulary,
  which UNK replacement copies); otherwise the tokenizer's pieces.
  """
  if isinstance(tokenizer, WordTokenizer):
    words = split_words(text, tokenizer.split_punctuation)[:num_real]
  else:
    ids = tokenizer.encode(text)[:num_real]
    words = [t.decode("utf-8") for t in tokenizer.id_to_token(np.asarray(ids, np.int32))
             .numpy().tolist()] if ids else []
  return words + [special_tokens.EOS]


def target_tokens(tokenizer, ids):
  """Target ids (EOS included) -> token strings."""
  return [t.decode("utf-8") for t in tokenizer.id_to_token(np.asarray(ids, np.int32))
          .numpy().tolist()]


def hard_alignment(attention):
  """Pharaoh links of attention [tgt_len, src_len] (both ending in EOS).

  Returns:
    list of (source index, target index) pairs, sorted by target index.
  """
  attention = np.asarray(attention)
  src_eos, links = attention.shape[1] - 1, []
  for j in range(attention.shape[0] - 1):  # the last row emits EOS
    i = int(np.argmax(attention[j]))
    if i != src_eos:
      links.append((i, j))
  return links


def argmax_agreement(attention, reference, window=1):
  """(hits, steps): the target steps whose attention argmax lies within `window` source
  positions of the argmax of `reference` (another model's attention for the same sentence
  pair), both [tgt_len, src_len] over the real positions (EOS row and column included)."""
  attention, reference = np.asarray(attention), np.asarray(reference)
  if attention.shape != reference.shape:
    raise ValueError(f"Received attention of shape {attention.shape} and reference of shape "
                     f"{reference.shape}; expected the same sentence pair's.")
  distance = np.abs(np.argmax(attention, -1) - np.argmax(reference, -1))  # [tgt_len]
  return int(np.sum(distance <= window)), int(distance.size)


def pharaoh(links):
  """[(i, j), ...] -> "i-j i-j ..."."""
  return " ".join(f"{i}-{j}" for i, j in links)


def soft_alignment(attention, src_tokens, tgt_tokens, decimals=4):
  """A JSON-ready dict: source tokens, target tokens and the attention rows."""
  matrix = np.round(np.asarray(attention, np.float64), decimals)
  return {"source_tokens": list(src_tokens), "target_tokens": list(tgt_tokens),
          "attention": matrix.tolist()}


def replace_unknowns(tgt_tokens, tgt_ids, attention, src_tokens):
  """Target tokens with every UNK replaced by its most-attended real source word.

  Args:
    tgt_tokens: target token strings (EOS included or not).
    tgt_ids: target ids, aligned with tgt_tokens.
    attention: [tgt_len, src_len] with src_len = len(src_tokens) (EOS last).
    src_tokens: source words then EOS (see `source_tokens`).

  Returns:
    list of token strings (same length as tgt_tokens).
  """
  attention = np.asarray(attention)
  num_real = len(src_tokens) - 1
  out = list(tgt_tokens)
  if num_real <= 0:
    return out
  for j, token_id in enumerate(tgt_ids):
    if token_id == special_tokens.UNK_ID:
      out[j] = src_tokens[int(np.argmax(attention[j, :num_real]))]
  return out


def hypothesis_view(translator, result, hyp, replace_unk):
  """(text, source tokens, target tokens) of hypothesis `hyp` of SentenceResult `result`, the
  target's UNKs replaced by their most-attended source words if asked (word vocabularies)."""
  src_tokens = source_tokens(translator.source_tokenizer, result.source,
                             len(result.source_ids) - 1)
  tgt_tokens = target_tokens(translator.target_tokenizer, hyp.ids)
  text = hyp.text
  if replace_unk:
    tgt_tokens = replace_unknowns(tgt_tokens, hyp.ids, hyp.attention, src_tokens)
    text = translator.target_tokenizer.join(tgt_tokens[:-1])  # a WordTokenizer
  return text, src_tokens, tgt_tokens
