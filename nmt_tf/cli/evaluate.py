"""`python run.py evaluate`: BLEU/chrF with signatures, length and UNK analyses, heat maps.

  python run.py evaluate --run_dir=runs/quickstart                      # the run's test split
  python run.py evaluate --run_dir=R --source_file=s.de --reference_file=r.en --beam_size=10

Writes to --eval_dir (default RUN/eval/SPLIT): hypotheses.txt, report.json,
sentence_stats.json (BLEU/chrF counts per sentence, for paired bootstrap tests without the
references), bleu_by_length.png (Bahdanau et al. 2015, Fig. 2) and attention_N.png for
--plot_sentences.
"""

import os
import sys

from absl import flags

from nmt_tf import data
from nmt_tf import write_path
from nmt_tf.cli import caption as caption_cli
from nmt_tf.cli import common
from nmt_tf.cli import translate as translate_cli
from nmt_tf.data import target_tags
from nmt_tf.evaluation.caption_report import evaluate_captions, format_caption_report
from nmt_tf.evaluation.report import evaluate, format_report
from nmt_tf.experiment import RunDir
from nmt_tf.training.captioning import load_splits

COMMAND = "evaluate"

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


def _evaluation_sets(translator, config):
  """[(name, sources, references)] from the flags: the given files, or the split of the run's
  corpus; of each of its language pairs for a run of several (data.pairs, "test_de-fr"),
  of --target_lang's alone when given."""
  if FLAGS.target_lang is not None:
    target_tags.check_language(FLAGS.target_lang, translator.target_languages)
  if FLAGS.source_file or FLAGS.reference_file or not config.data.pairs:
    name, sources, references = _evaluation_set(config)
    if FLAGS.source_file:  # the corpus's sources are tagged already
      sources = translator.tag(sources, FLAGS.target_lang)
    return [(name, sources, references)]
  sets = []
  for pair, corpus in data.pair_corpora(config.data).items():
    if FLAGS.target_lang is not None and not pair.endswith(f"-{FLAGS.target_lang}"):
      continue
    split = _split(corpus)
    sets.append((f"{FLAGS.eval_split}_{pair}", list(split.sources), list(split.targets)))
  return sets


def _split(corpus):
  """The split --eval_split of `corpus` as a ParallelText; DataError if it has none."""
  if FLAGS.eval_split not in corpus:
    raise data.DataError(
        f"The run's corpus has no {FLAGS.eval_split!r} split (it has "
        f"{', '.join(sorted(corpus))}); pass --eval_split with one of those, or "
        "--source_file and --reference_file.")
  split = corpus[FLAGS.eval_split]
  if not isinstance(split, data.ParallelText):  # a tf.data corpus (TFDS)
    pairs = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in split.as_numpy_iterator()]
    return data.ParallelText([s for s, _ in pairs], [t for _, t in pairs])
  return split


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
  split = _split(data.load_corpus(config.data))
  return FLAGS.eval_split, list(split.sources), list(split.targets)


def _plot_indices():
  try:
    return [int(i) for i in FLAGS.plot_sentences]
  except ValueError as error:
    raise ValueError(f"Received --plot_sentences={FLAGS.plot_sentences}; expected 0-based "
                     "sentence numbers such as 0,5,12.") from error


@common.decoding_command
def run(argv):
  if argv:
    print(f"error: evaluate takes no positional arguments; received {argv}; pass "
          "--source_file/--reference_file or --eval_split.", file=sys.stderr)
    return 2
  try:
    if RunDir(FLAGS.run_dir).load_config().model.encoder == "image":
      return _evaluate_captions()
    translator, config, decode, paths = translate_cli.build_translator()
    sets = _evaluation_sets(translator, config)
    plot = _plot_indices()
    out_dirs = []
    for name, _, _ in sets:  # every destination checked before the first decoding
      base = FLAGS.eval_dir or os.path.join(FLAGS.run_dir, "eval")
      out_dirs.append(os.path.join(base, name) if FLAGS.eval_dir is None or len(sets) > 1
                      else base)
      write_path.check_folder(out_dirs[-1], "--eval_dir",
                              inputs=[FLAGS.source_file, FLAGS.reference_file])
    for (name, sources, references), out_dir in zip(sets, out_dirs):
      results = translate_cli.decode_lines(translator, decode, sources)
      report = evaluate(translator, results, sources, references, out_dir, decode.beam_size,
                        decode.length_penalty, FLAGS.length_bucket_width, plot)
      if len(sets) > 1:
        print(f"== {name}\n{format_report(report)}\nwritten to {out_dir}\n")
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  if len(sets) > 1:
    print(f"checkpoints: {', '.join(paths)}")
  else:
    print(format_report(report))
    print(f"\ncheckpoints: {', '.join(paths)}\nwritten to {out_dirs[0]}")
  return 0


def _evaluate_captions():
  """evaluate on a captioning run: the split --eval_split of its images and captions."""
  if FLAGS.source_file or FLAGS.reference_file:
    raise ValueError("A captioning run is evaluated on its corpus split (--eval_split); "
                     "--source_file and --reference_file are for translation runs.")
  captioner, decode = caption_cli.load_captioner()
  config = RunDir(FLAGS.run_dir).load_config()
  splits = load_splits(config, RunDir(FLAGS.run_dir).path)
  if FLAGS.eval_split not in splits:
    raise ValueError(f"The run's corpus has no {FLAGS.eval_split} split; give it one "
                     f"(data.{FLAGS.eval_split}_tgt) or pick --eval_split.")
  out_dir = FLAGS.eval_dir or os.path.join(FLAGS.run_dir, "eval", FLAGS.eval_split)
  write_path.check_folder(out_dir, "--eval_dir")
  report = evaluate_captions(captioner, splits[FLAGS.eval_split], out_dir, decode.beam_size,
                             decode.batch_size, _plot_indices())
  print(format_caption_report(report))
  print(f"\nwritten to {out_dir}")
  return 0
