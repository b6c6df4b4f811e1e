"""`python run.py score`: the model's log-probability of given translations (forced decoding).

  python run.py score --run_dir=R --source_file=src.de --target_file=hyp.en > scores.tsv

One line per pair: `log_prob<TAB>tokens<TAB>log_prob_per_token` (natural log, EOS counted as
a token); the total, the per-token mean and the perplexity go to stderr. One teacher-forced
forward pass per batch (nmt_tf/inference/forced_scoring.py); ensembles via --checkpoints.
"""

import math
import sys

from absl import flags

from nmt_tf import data
from nmt_tf import write_path
from nmt_tf.cli import common
from nmt_tf.cli import translate as translate_cli

COMMAND = "score"

flags.DEFINE_string("target_file", None, "Translations to score, line-aligned with "
                    "--source_file.")
flags.DEFINE_string("score_output", "-", "Where per-sentence scores go ('-' = stdout).")

FLAGS = flags.FLAGS


@common.decoding_command
def run(argv):
  if argv:
    print(f"error: score takes no positional arguments; received {argv}; pass "
          "--source_file and --target_file.", file=sys.stderr)
    return 2
  if not FLAGS.source_file or not FLAGS.target_file:
    print("error: score needs --source_file and --target_file (line-aligned).",
          file=sys.stderr)
    return 2
  # Imported here to keep the module import light; ForcedScorer pulls in TensorFlow.
  from nmt_tf.inference import ForcedScorer  # pylint: disable=g-import-not-at-top
  try:
    if FLAGS.score_output != "-":
      write_path.check_output(FLAGS.score_output, "--score_output",
                              inputs=[FLAGS.source_file, FLAGS.target_file])
    sources = data.read_lines(FLAGS.source_file, "score source")
    targets = data.read_lines(FLAGS.target_file, "score target")
    if len(sources) != len(targets):
      raise ValueError(f"{FLAGS.source_file} has {len(sources)} lines and {FLAGS.target_file} "
                       f"{len(targets)}; expected one translation per source line.")
    translator, _, decode, _ = translate_cli.build_translator()
    sources = translator.tag(sources, FLAGS.target_lang)
    scores = ForcedScorer(translator).score(sources, targets, decode.batch_size)
    code = common.write_lines(FLAGS.score_output, (
        f"{s.log_prob:.6f}\t{s.num_tokens}\t{s.per_token:.6f}" for s in scores), "score")
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  if code:
    return code
  total = sum(s.log_prob for s in scores)
  tokens = sum(s.num_tokens for s in scores)
  per_token = total / max(tokens, 1)
  print(f"sentences {len(scores)}  tokens {tokens}  log_prob {total:.4f}  per token "
        f"{per_token:.4f}  perplexity {math.exp(-per_token):.3f}", file=sys.stderr)
  return 0
