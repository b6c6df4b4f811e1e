"""Keras callbacks for `Seq2Seq.fit`: the validation of `nmt-tf train` (validation.py) at the
end of an epoch, by greedy BLEU, with its alignment images in TensorBoard."""

import keras

from nmt_tf import data
from nmt_tf.experiment import ExperimentConfig
from nmt_tf.training.summaries import Summaries
from nmt_tf.training.validation import Validator


class BleuValidation(keras.callbacks.Callback):
  """Scores the model every `every` epochs as `nmt-tf train` validates: the token loss and
  perplexity of (sources, references), and the sacrebleu BLEU of the greedy translations
  (the Translator, text in and text out).

  The epoch's logs get `val_bleu` and `val_length_ratio` (so EarlyStopping and
  ModelCheckpoint can monitor them; with `fit`'s validation_data, `val_loss` stays Keras'),
  and with `log_dir` the events that `nmt-tf train` writes under its run's tensorboard/, at
  the epoch's step: valid/loss, valid/perplexity, valid/bleu, valid/length_ratio, the
  attention maps valid/alignment/<i> (greedy) and valid/alignment_beam/<i> (beam search
  of decode.beam_size), and valid/samples.

  Args:
    source_tokenizer, target_tokenizer: the tokenizers of the model's vocabularies
      (`nmt_tf.data` tokenizers, or a run's: `nmt_tf.load(RUN).translator`).
    sources, references: the validation sentences (python strings).
    config: an ExperimentConfig for the decode settings, train.eval_max_sentences and
      train.alignment_images (default: ExperimentConfig's defaults).
    log_dir: where to write TensorBoard events, or None.
    every: validate after every `every` epochs.
  """

  def __init__(self, source_tokenizer, target_tokenizer, sources, references, config=None,
               log_dir=None, every=1):
    super().__init__()
    if len(sources) != len(references):
      raise ValueError(f"BleuValidation received {len(sources)} sources and "
                       f"{len(references)} references; give one reference per source.")
    self.tokenizers = (source_tokenizer, target_tokenizer)
    self.split = data.ParallelText(list(sources), list(references))
    self.config = config or ExperimentConfig()
    self.log_dir = log_dir
    self.every = every
    self._validator = None
    self._summaries = None

  def on_train_begin(self, logs=None):
    self._validator = Validator(self.model, *self.tokenizers, self.split, self.config)
    if self.log_dir:
      self._summaries = Summaries(self.log_dir)

  def on_epoch_end(self, epoch, logs=None):
    if (epoch + 1) % self.every:
      return
    result = self._validator.run()
    if logs is not None:
      logs["val_bleu"] = result.bleu
      logs["val_length_ratio"] = result.length_ratio
    if self._summaries is not None:
      self._summaries.validation(result, epoch + 1)

  def on_train_end(self, logs=None):
    if self._summaries is not None:
      self._summaries.close()
      self._summaries = None
