"""The evaluation report of a test set: sacrebleu BLEU and chrF with their signatures, BLEU by
source length (Bahdanau et al. 2015, Fig. 2), BLEU with and without sentences whose source or
reference holds an unknown word, per-sentence statistics for paired bootstrap tests without the
references, and attention heat maps. `nmt-tf evaluate` is a thin shell over it."""

import os

from nmt_tf.write_path import make_folder, write_bytes, write_json, write_text
from nmt_tf.evaluation import analysis
from nmt_tf.evaluation import significance
from nmt_tf.evaluation.alignment_plot import alignment_png
from nmt_tf.evaluation.length_plot import length_bleu_png
from nmt_tf.evaluation.scoring import corpus_bleu, corpus_chrf
from nmt_tf.inference import alignments


def evaluate(translator, results, sources, references, out_dir, beam_size, length_penalty,
             length_bucket_width=10, plot_sentences=(0, 1, 2)):
  """Scores the translations of `sources` and writes them with the report into `out_dir`.

  Args:
    translator: the Translator that gave `results` (its tokenizers).
    results: its SentenceResults for `sources`, in order.
    sources, references: the sentences, line-aligned.
    out_dir: where hypotheses.txt, report.json, sentence_stats.json, bleu_by_length.png and
      attention_N.png go (created).
    beam_size, length_penalty: the search's, recorded in the report.
    length_bucket_width: source words per bucket of BLEU by length.
    plot_sentences: 0-based sentence numbers whose attention is drawn (others ignored).

  Returns:
    The report dict (what report.json holds).
  """
  hypotheses = [r.hypotheses[0].text if r.hypotheses else "" for r in results]
  make_folder(out_dir, "--eval_dir")
  write_text(os.path.join(out_dir, "hypotheses.txt"), "".join(h + "\n" for h in hypotheses))
  bleu, chrf = corpus_bleu(hypotheses, references), corpus_chrf(hypotheses, references)
  lowercased = corpus_bleu(hypotheses, references, lowercase=True)
  significance.write_statistics(os.path.join(out_dir, significance.STATS_FILE),
                                significance.sentence_statistics(hypotheses, references))
  buckets = analysis.bleu_by_length(sources, hypotheses, references,
                                    length_bucket_width)
  mask = analysis.unk_mask(sources, references, translator.source_tokenizer,
                           translator.target_tokenizer)
  unk = analysis.bleu_all_and_no_unk(hypotheses, references, mask)
  write_bytes(os.path.join(out_dir, "bleu_by_length.png"),
              length_bleu_png(buckets, title="BLEU by source length"))
  images = []
  for i in [i for i in plot_sentences if 0 <= i < len(results)]:
    r = results[i]
    if not r.hypotheses:
      continue
    _, src_tokens, tgt_tokens = alignments.hypothesis_view(translator, r, r.hypotheses[0], False)
    path = os.path.join(out_dir, f"attention_{i}.png")
    write_bytes(path, alignment_png(r.hypotheses[0].attention, src_tokens, tgt_tokens,
                                    title=f"sentence {i}"))
    images.append(path)
  report = {
      "sentences": len(sources), "beam_size": beam_size, "length_penalty": length_penalty,
      "bleu": bleu.score, "bleu_signature": bleu.signature,
      "bleu_length_ratio": bleu.length_ratio,  # hypothesis / reference tokens
      "chrf": chrf.score, "chrf_signature": chrf.signature,
      # The scoring of published tables on lowercased, tokenized text (13a tokenizes).
      "bleu_lowercase": lowercased.score, "bleu_lowercase_signature": lowercased.signature,
      "bleu_by_length": [dict(source_words=b.label, sentences=b.count, bleu=b.bleu)
                         for b in buckets],
      "bleu_all": unk["all"].score,
      "bleu_no_unk": None if unk["no_unk"] is None else unk["no_unk"].score,
      "no_unk_sentences": unk["no_unk_sentences"],
      "truncated_sentences": sum(r.truncated for r in results),
      "attention_images": images,
  }
  write_json(os.path.join(out_dir, "report.json"), report)
  return report


def format_report(report):
  """The report as the lines `nmt-tf evaluate` prints."""
  lines = [f"BLEU  = {report['bleu']:.2f}  (length ratio {report['bleu_length_ratio']:.3f}; "
           f"{report['bleu_signature']})",
           f"chrF2 = {report['chrf']:.2f}  ({report['chrf_signature']})",
           f"BLEU lowercased = {report['bleu_lowercase']:.2f}  "
           f"({report['bleu_lowercase_signature']})",
           "", "BLEU by source length (words):"]
  lines += [f"  {b['source_words']:>8}  {b['sentences']:>6} sentences  BLEU {b['bleu']:6.2f}"
            for b in report["bleu_by_length"]]
  no_unk = report["bleu_no_unk"]
  lines += ["", f"BLEU all sentences ({report['sentences']}): {report['bleu_all']:.2f}",
            f"BLEU no UNK ({report['no_unk_sentences']}): "
            + ("n/a" if no_unk is None else f"{no_unk:.2f}")]
  return "\n".join(lines)
