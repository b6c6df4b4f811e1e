"""Training caption generation (model.encoder="image"): the Trainer with images as sources.

Everything but the data is the translation trainer's: the train step (REINFORCE for hard
attention included), checkpoints and exact resume, best/, early stopping, the time budget,
the run lock and TensorBoard. What differs:
  data        data/captions.py: `image<TAB>caption` files (or the generated shapes set),
              batches of pipeline.batch_size images, epoch e shuffled under pipeline.seed + e;
  vocabulary  a word (or SentencePiece) vocabulary trained on the training captions, saved
              as both sides of the run's vocab/ (the source side is unused);
  validation  loss and perplexity over every validation caption, greedy BLEU of one caption
              per image against all of its captions (sacrebleu's multiple references), and
              the attention of each word over the image (valid/alignment/<i>, greedy, and
              valid/alignment_beam/<i> with decode.beam_size).
"""

import dataclasses
import math
import os

import numpy as np
import tensorflow as tf

from nmt_tf import data
from nmt_tf.data import captions
from nmt_tf.evaluation import scoring
from nmt_tf.evaluation.image_attention import caption_attention_png
from nmt_tf.experiment import corpus_fingerprint, RunDir
from nmt_tf.experiment import parent as parent_lib
from nmt_tf.inference.image_captioner import Captioner
from nmt_tf.training.data_order import CaptionOrder
from nmt_tf.training.trainer import Trainer
from nmt_tf.training.train_step import make_eval_loss_fn
from nmt_tf.training.validation import dataset_loss, ValidationResult


def load_splits(config, run_path):
  """{split: CaptionSplit} of a captioning config; the shapes set goes to RUN/shapes unless
  data.data_dir says where."""
  return captions.load_captions(config.data, config.model.image_size,
                                default_dir=RunDir(run_path).shapes_dir)


def caption_corpus(splits):
  """The captions as the text corpus of the tokenizers and the corpus fingerprint: each
  caption on both sides, the captions file recorded as the split's file."""
  return {name: data.ParallelText(split.captions, split.captions, name=name,
                                  paths=(split.path,) if split.path else ())
          for name, split in splits.items()}


class CaptionValidator:
  """Scores an ImageCaptioner on the validation images (module docstring).

  Args:
    model: the models.ImageCaptioner being trained.
    tokenizer: the caption tokenizer.
    split: the validation CaptionSplit.
    config: the ExperimentConfig (decode, pipeline.eval_batch_size, train.eval_max_sentences
      as a number of images, train.alignment_images).
  """

  def __init__(self, model, tokenizer, split, config):
    images, self.references = split.references()
    limit = config.train.eval_max_sentences
    if limit:
      images, self.references = images[:limit], self.references[:limit]
    self.images = images
    kept = set(images)
    rows = [i for i, image in enumerate(split.images) if image in kept]
    size = model.model_config.image_size
    self.loss_dataset = captions.caption_batches(split, tokenizer, size,
                                                 config.pipeline.eval_batch_size, rows)
    self.image_dataset = captions.image_dataset(images, size).batch(config.decode.batch_size)
    self.loss_fn = make_eval_loss_fn(model, source_spec=tf.TensorSpec([None, size, size, 3]))
    greedy = dataclasses.replace(config.decode, beam_size=1, nbest=1)
    self.captioner = Captioner(model, tokenizer, greedy)
    spec = [tf.TensorSpec([None, size, size, 3], tf.float32)]
    self.greedy_fn = tf.function(lambda x: self.captioner.caption(x, 1, 1),
                                 input_signature=spec, autograph=False)
    self.beam_size = config.decode.beam_size
    self.num_alignments = min(config.train.alignment_images, len(images))
    self.beam_fn = None
    if self.beam_size > 1 and self.num_alignments:
      beam = dataclasses.replace(config.decode, nbest=1)
      self.beam_fn = tf.function(
          lambda x: Captioner(model, tokenizer, beam).caption(x, self.beam_size, 1),
          input_signature=spec, autograph=False)

  def run(self):
    """Returns a ValidationResult (samples: image file, first reference, caption)."""
    loss = dataset_loss(self.loss_fn, self.loss_dataset)
    hypotheses, alignments, shown = [], [], []
    for images in self.image_dataset:
      out = self.greedy_fn(images)
      start = len(hypotheses)
      hypotheses += [t.decode("utf-8") for t in out["caption"][:, 0].numpy()]
      for row in range(max(0, min(self.num_alignments - start, len(images)))):
        shown.append(images[row].numpy())
        alignments.append(self._heat_map(start + row, shown[-1], out, row, "greedy"))
    beam_alignments = []
    if self.beam_fn is not None:
      out = self.beam_fn(tf.constant(np.stack(shown)))
      beam_alignments = [self._heat_map(i, shown[i], out, i, f"beam {self.beam_size}")
                         for i in range(len(shown))]
    bleu = scoring.corpus_bleu(hypotheses, self.references)
    samples = [(os.path.basename(image), refs[0], hyp) for image, refs, hyp in
               zip(self.images, self.references, hypotheses)][:max(self.num_alignments, 3)]
    return ValidationResult(loss=loss, perplexity=math.exp(min(loss, 50.0)), bleu=bleu.score,
                            samples=samples, alignments=alignments,
                            length_ratio=bleu.length_ratio, hypotheses=hypotheses,
                            beam_alignments=beam_alignments)

  def _heat_map(self, index, image, out, row, search):
    """(title, PNG) of the attention of each word of row `row` of a caption output."""
    title = f"valid image {index} ({os.path.basename(self.images[index])}), {search}"
    return title, caption_attention_png(self.captioner, image, out, row, title)


class CaptionTrainer(Trainer):
  """The Trainer for model.encoder="image" (module docstring); same arguments, with
  `corpus` a {split: CaptionSplit} when given."""

  def prepare_data(self, config, corpus, accept_changed_corpus):
    splits = corpus if corpus is not None else load_splits(config, self.run_dir.path)
    text = caption_corpus(splits)
    self.config, _, self.src_tok, self.tgt_tok = self.run_dir.prepare(
        config, {"train": text["train"]}, write=self.worker.is_chief,
        parent=None if self.parent is None else parent_lib.record(self.parent))
    self.corpus = splits
    if self.worker.is_chief:
      corpus_fingerprint.check(self.run_dir.path, text, accept_changed_corpus,
                               report=self._warn)

  def make_validator(self):
    return CaptionValidator(self.model, self.tgt_tok, self.corpus["valid"], self.config)

  def training_batches(self):
    pipeline = self.config.pipeline
    return CaptionOrder(self.corpus["train"], self.tgt_tok, self.config.model.image_size,
                        pipeline.batch_size, pipeline.seed, pipeline.max_target_len,
                        self.worker.num_workers, self.worker.index)

  def no_batch_message(self):
    return (f"No training batch: every caption of the training split is longer than "
            f"pipeline.max_target_len={self.config.pipeline.max_target_len} tokens; raise it "
            "(--config.pipeline.max_target_len=...) or check the captions file.")
