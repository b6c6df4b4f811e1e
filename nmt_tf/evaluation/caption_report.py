"""The evaluation report of a captioning test set: sacrebleu BLEU and chrF of one caption per
image against all of its captions (multiple references), with their signatures, and the
attention heat maps of chosen images. `nmt-tf evaluate` on a captioning run writes it."""

import os

import numpy as np
import tensorflow as tf

from nmt_tf.write_path import make_folder, write_bytes, write_json, write_text
from nmt_tf.data import captions
from nmt_tf.evaluation.image_attention import caption_attention_png
from nmt_tf.evaluation.scoring import corpus_bleu, corpus_chrf


def evaluate_captions(captioner, split, out_dir, beam_size, batch_size, plot_images=(0, 1, 2)):
  """Captions every image of `split` and writes hypotheses.txt (image<TAB>caption),
  report.json and attention_N.png into `out_dir`.

  Args:
    captioner: an inference.image_captioner.Captioner.
    split: a data.captions.CaptionSplit.
    out_dir: the output directory (created).
    beam_size: the search's beam (1: greedy).
    batch_size: images per search.
    plot_images: 0-based image numbers whose attention is drawn (others ignored).

  Returns:
    The report dict (what report.json holds).
  """
  images, references = split.references()
  size = captioner.image_size
  spec = tf.TensorSpec([None, size, size, 3], tf.float32)
  search = tf.function(lambda x: captioner.caption(x, beam_size, 1), input_signature=[spec],
                       autograph=False)
  hypotheses, maps = [], []
  make_folder(out_dir, "--eval_dir")
  plot = set(plot_images)
  for start, batch in zip(range(0, len(images), batch_size),
                          captions.image_dataset(images, size).batch(batch_size)):
    out = search(batch)
    hypotheses += [t.decode("utf-8") for t in out["caption"][:, 0].numpy()]
    for row in range(int(batch.shape[0])):
      if start + row not in plot:
        continue
      path = os.path.join(out_dir, f"attention_{start + row}.png")
      write_bytes(path, caption_attention_png(captioner, np.asarray(batch[row]), out, row,
                                              os.path.basename(images[start + row])))
      maps.append(path)
  write_text(os.path.join(out_dir, "hypotheses.txt"),
             "".join(f"{image}\t{h}\n" for image, h in zip(images, hypotheses)))
  bleu, chrf = corpus_bleu(hypotheses, references), corpus_chrf(hypotheses, references)
  report = {
      "images": len(images), "references": sum(len(r) for r in references),
      "bleu": bleu.score, "bleu_signature": bleu.signature,
      "bleu_length_ratio": bleu.length_ratio, "chrf": chrf.score,
      "chrf_signature": chrf.signature, "beam_size": beam_size, "attention_images": maps,
  }
  write_json(os.path.join(out_dir, "report.json"), report)
  return report


def format_caption_report(report):
  """The report as the lines `nmt-tf evaluate` prints."""
  return "\n".join([
      f"{report['images']} images, {report['references']} reference captions",
      f"BLEU  = {report['bleu']:.2f}  (length ratio {report['bleu_length_ratio']:.3f}; "
      f"{report['bleu_signature']})",
      f"chrF2 = {report['chrf']:.2f}  ({report['chrf_signature']})"])
