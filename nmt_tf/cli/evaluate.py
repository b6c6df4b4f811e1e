"""`python run.py evaluate`: BLEU/chrF with signatures, length and UNK analyses, heat maps.

  python run.py evaluate --run_dir=runs/quickstart                      # the run's test split
  python run.py evaluate --run_dir=R --source_file=s.de --reference_file=r.en --beam_size=10

Writes to --eval_dir (default RUN/eval/SPLIT): hypotheses.txt, report.json,
sentence_stats.json (BLEU/chrF counts per sentence, for paired bootstrap tests without the
references), bleu_by_length.png (Bahdanau et al. 2015, Fig. 2) and attention_N.png for
--plot_sentences.
"""

import json
import os
import sys

from absl import flags

from nmt_tf import data
from nmt_tf.atomic_write import write_json
from nmt_tf.cli import common
from nmt_tf.cli import translate as translate_cli
from nmt_tf.evaluation import analysis
from nmt_tf.evaluation import significance
from nmt_tf.evaluation.alignment_plot import alignment_png
from nmt_tf.evaluation.length_plot import length_bleu_png
from nmt_tf.evaluation.scoring import corpus_bleu, corpus_chrf

COMMAND = "evaluate"
HELP = "BLEU/chrF (sacrebleu), BLEU by length and without UNK, attention heat maps."

flags.DEFINE_enum("eval_split", "test", ["valid", "test"], "Corpus split to evaluate when "
                  "--source_file is not given.")
flags.DEFINE_string("source_file", None, "Source sentences to evaluate (with "
                    "--reference_file); default: the run's corpus split --eval_split.")
flags.DEFINE_string("reference_file", None, "Reference translations, line-aligned with "
                    "--source_file.")
flags.DEFINE_string("eval_dir", None, "Output directory; default RUN_DIR/eval/SPLIT.")
flags.DEFINE_integer("length_bucket_width", 10, "Source words per length bucket.")
flags.DEFINE_list("plot_sentences", ["0", "1", "2"], "0-based sentence numbers to draw "
                  "attention heat maps for.")

FLAGS = flags.FLAGS


def _evaluation_set(config):
  """(name, sources, references) from the flags."""
  if FLAGS.source_file or FLAGS.reference_file:
    if not (FLAGS.source_file and FLAGS.reference_file):
      raise ValueError("Received only one of --source_file and --reference_file; pass both.")
    sources = data.read_lines(FLAGS.source_file, "evaluation source")
    references = data.read_lines(FLAGS.reference_file, "evaluation reference")
    if len(sources) != len(references):
      raise ValueError(f"{FLAGS.source_file} has {len(sources)} lines and "
                       f"{FLAGS.reference_file} {len(references)}; expected line-aligned "
                       "files.")
    return os.path.splitext(os.path.basename(FLAGS.source_file))[0], sources, references
  corpus = data.load_corpus(config.data)
  if FLAGS.eval_split not in corpus:
    raise data.DataError(
        f"The run's corpus has no {FLAGS.eval_split!r} split (it has "
        f"{', '.join(sorted(corpus))}); pass --eval_split with one of those, or "
        "--source_file and --reference_file.")
  split = corpus[FLAGS.eval_split]
  if not isinstance(split, data.ParallelText):  # a tf.data corpus (TFDS)
    pairs = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in split.as_numpy_iterator()]
    return FLAGS.eval_split, [s for s, _ in pairs], [t for _, t in pairs]
  return FLAGS.eval_split, list(split.sources), list(split.targets)


def _plot_indices(count):
  try:
    indices = [int(i) for i in FLAGS.plot_sentences]
  except ValueError as error:
    raise ValueError(f"Received --plot_sentences={FLAGS.plot_sentences}; expected 0-based "
                     "sentence numbers such as 0,5,12.") from error
  return [i for i in indices if 0 <= i < count]


def evaluate(translator, decode, sources, references, out_dir):
  """Translates, scores and writes the report; returns the report dict."""
  results = translate_cli.decode_lines(translator, decode, sources)
  hypotheses = [r.hypotheses[0].text if r.hypotheses else "" for r in results]
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "hypotheses.txt"), "w", encoding="utf-8") as f:
    f.writelines(h + "\n" for h in hypotheses)
  bleu, chrf = corpus_bleu(hypotheses, references), corpus_chrf(hypotheses, references)
  significance.write_statistics(os.path.join(out_dir, significance.STATS_FILE),
                                significance.sentence_statistics(hypotheses, references))
  buckets = analysis.bleu_by_length(sources, hypotheses, references,
                                    FLAGS.length_bucket_width)
  mask = analysis.unk_mask(sources, references, translator.source_tokenizer,
                           translator.target_tokenizer)
  unk = analysis.bleu_all_and_no_unk(hypotheses, references, mask)
  with open(os.path.join(out_dir, "bleu_by_length.png"), "wb") as f:
    f.write(length_bleu_png(buckets, title="BLEU by source length"))
  images = []
  for i in _plot_indices(len(results)):
    r = results[i]
    if not r.hypotheses:
      continue
    _, src_tokens, tgt_tokens = translate_cli.hypothesis_view(translator, r, r.hypotheses[0],
                                                              False)
    path = os.path.join(out_dir, f"attention_{i}.png")
    with open(path, "wb") as f:
      f.write(alignment_png(r.hypotheses[0].attention, src_tokens, tgt_tokens,
                            title=f"sentence {i}"))
    images.append(path)
  report = {
      "sentences": len(sources), "beam_size": decode.beam_size,
      "length_penalty": decode.length_penalty,
      "bleu": bleu.score, "bleu_signature": bleu.signature,
      "bleu_length_ratio": bleu.length_ratio,  # hypothesis / reference tokens
      "chrf": chrf.score, "chrf_signature": chrf.signature,
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
  lines = [f"BLEU  = {report['bleu']:.2f}  (length ratio {report['bleu_length_ratio']:.3f}; "
           f"{report['bleu_signature']})",
           f"chrF2 = {report['chrf']:.2f}  ({report['chrf_signature']})",
           "", "BLEU by source length (words):"]
  lines += [f"  {b['source_words']:>8}  {b['sentences']:>6} sentences  BLEU {b['bleu']:6.2f}"
            for b in report["bleu_by_length"]]
  no_unk = report["bleu_no_unk"]
  lines += ["", f"BLEU all sentences ({report['sentences']}): {report['bleu_all']:.2f}",
            f"BLEU no UNK ({report['no_unk_sentences']}): "
            + ("n/a" if no_unk is None else f"{no_unk:.2f}")]
  return "\n".join(lines)


def run(argv):
  if argv:
    print(f"error: evaluate takes no positional arguments; received {argv}; pass "
          "--source_file/--reference_file or --eval_split.", file=sys.stderr)
    return 2
  try:
    translator, config, decode, paths = translate_cli.build_translator()
    name, sources, references = _evaluation_set(config)
    out_dir = FLAGS.eval_dir or os.path.join(FLAGS.run_dir, "eval", name)
    report = evaluate(translator, decode, sources, references, out_dir)
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(format_report(report))
  print(f"\ncheckpoints: {', '.join(paths)}\nwritten to {out_dir}")
  return 0
