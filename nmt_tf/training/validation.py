"""Validation: loss, perplexity and greedy BLEU on the validation split, plus alignments.

  loss = sum of token NLL / number of target tokens (EOS included), perplexity = exp(loss);
  BLEU = sacrebleu corpus BLEU of the detokenized greedy Translator output against the raw
  reference sentences (the same code path as `run.py translate`), with its length ratio
  (hypothesis / reference tokens: a BLEU drop with a ratio below 1 is the brevity penalty).
"""

import dataclasses
import math
from typing import List, Tuple

import numpy as np
import tensorflow as tf

from nmt_tf import data
from nmt_tf.evaluation import scoring
from nmt_tf.evaluation.alignment_plot import alignment_png
from nmt_tf.inference.translator import Translator
from nmt_tf.training.train_step import make_eval_loss_fn


@dataclasses.dataclass
class ValidationResult:
  """loss, perplexity, bleu; samples [(source, reference, hypothesis)]; alignments
  [(title, png bytes)] of greedy search, beam_alignments of beam search (decode.beam_size > 1);
  length_ratio of BLEU; hypotheses: the greedy output, one per validation sentence."""

  loss: float
  perplexity: float
  bleu: float
  samples: List[Tuple[str, str, str]]
  alignments: List[Tuple[str, bytes]]
  length_ratio: float = float("nan")
  hypotheses: List[str] = dataclasses.field(default_factory=list)
  beam_alignments: List[Tuple[str, bytes]] = dataclasses.field(default_factory=list)


def _texts(split, limit):
  """(sources, targets) python string lists of a split, at most `limit` (0 = all)."""
  if isinstance(split, data.ParallelText):
    sources, targets = list(split.sources), list(split.targets)
  else:
    sources, targets = [], []
    for src, tgt in split.as_numpy_iterator():
      sources.append(src.decode("utf-8"))
      targets.append(tgt.decode("utf-8"))
      if limit and len(sources) >= limit:
        break
  if limit:
    sources, targets = sources[:limit], targets[:limit]
  return sources, targets


def dataset_loss(loss_fn, dataset):
  """The mean token NLL over the batches of `dataset` (make_eval_loss_fn's loss_fn)."""
  loss_sum, tokens = 0.0, 0.0
  for batch in dataset:
    s, n = loss_fn(batch["source"], batch["target_in"], batch["target_out"])
    loss_sum += float(s)
    tokens += float(n)
  return loss_sum / max(tokens, 1.0)


class Validator:
  """Scores a model on the validation split.

  Args:
    model: the Seq2Seq being trained.
    source_tokenizer, target_tokenizer: the run's tokenizers.
    split: the validation ParallelText (or tf.data.Dataset of string pairs).
    config: the ExperimentConfig (pipeline, decode, train.eval_max_sentences,
      train.alignment_images).
  """

  def __init__(self, model, source_tokenizer, target_tokenizer, split, config):
    self.sources, self.references = _texts(split, config.train.eval_max_sentences)
    if not self.sources:
      raise ValueError("The validation split is empty; give the corpus a validation split.")
    self.target_tokenizer = target_tokenizer
    self.source_tokenizer = source_tokenizer
    self.batch_size = config.decode.batch_size
    self.num_alignments = min(config.train.alignment_images, len(self.sources))
    self.dataset = data.make_eval_dataset(
        data.ParallelText(self.sources, self.references), source_tokenizer, target_tokenizer,
        config.pipeline)
    self.loss_fn = make_eval_loss_fn(model)
    decode_config = dataclasses.replace(config.decode, beam_size=1, nbest=1)
    max_len = config.pipeline.max_source_len or 200
    self.translator = Translator(model, source_tokenizer, target_tokenizer, decode_config,
                                 max_source_length=max(max_len, 200))
    texts = [tf.TensorSpec([None], tf.string)]  # one trace for every chunk size
    self.translate_fn = tf.function(lambda text: self.translator.translate(text, 1, 1),
                                    input_signature=texts, autograph=False)
    # The attention of beam search too, for the same few sentences (decode.beam_size).
    self.beam_size = config.decode.beam_size
    self.beam_fn = None
    if self.beam_size > 1 and self.num_alignments:
      self.beam_fn = tf.function(
          lambda text: self.translator.translate(text, self.beam_size, 1), autograph=False)

  def run(self):
    """Returns a ValidationResult."""
    loss = dataset_loss(self.loss_fn, self.dataset)
    hypotheses, alignments = [], []
    for start in range(0, len(self.sources), self.batch_size):
      chunk = self.sources[start:start + self.batch_size]
      out = self.translate_fn(tf.constant(chunk))
      hypotheses += [t.decode("utf-8") for t in out["translation"][:, 0].numpy()]
      for i in range(max(0, min(self.num_alignments - start, len(chunk)))):
        alignments.append(self._alignment(start + i, out, i))
    beam_alignments = []
    if self.beam_fn is not None:
      out = self.beam_fn(tf.constant(self.sources[:self.num_alignments]))
      beam_alignments = [self._alignment(i, out, i, f"beam {self.beam_size}")
                         for i in range(self.num_alignments)]
    bleu = scoring.corpus_bleu(hypotheses, self.references)
    samples = list(zip(self.sources, self.references, hypotheses))[:max(self.num_alignments, 3)]
    return ValidationResult(loss=loss, perplexity=math.exp(min(loss, 50.0)), bleu=bleu.score,
                            samples=samples, alignments=alignments,
                            length_ratio=bleu.length_ratio, hypotheses=hypotheses,
                            beam_alignments=beam_alignments)

  def _alignment(self, index, out, row, search="greedy"):
    """(title, PNG) of sentence `index`, row `row` of the Translator output `out`."""
    source_ids = out["source"][row].numpy()
    source_ids = source_ids[source_ids != 0]  # [src_len] incl. EOS
    length = int(out["lengths"][row, 0])
    target_ids = out["ids"][row, 0, :length].numpy()  # [tgt_len] incl. EOS
    attention = out["attention"][row, 0, :length, :len(source_ids)].numpy()  # [tgt, src]
    src_tokens = self.source_tokenizer.id_to_token(tf.constant(source_ids, tf.int32)).numpy()
    tgt_tokens = self.target_tokenizer.id_to_token(tf.constant(target_ids, tf.int32)).numpy()
    title = f"valid sentence {index}, {search}"
    return title, alignment_png(np.asarray(attention), list(src_tokens), list(tgt_tokens),
                                title=title)
