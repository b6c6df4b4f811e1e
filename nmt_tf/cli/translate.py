"""`python run.py translate`: translate a file or stdin to stdout.

  python run.py translate --run_dir=runs/quickstart --input_file=src.txt > out.txt
  echo "the boy helps the king" | python run.py translate --run_dir=runs/quickstart --beam_size=5

Output, one line per input line (an empty line gives an empty translation):
  plain                   translation
  --nbest=N (N > 1)       i ||| translation ||| score ||| log_prob   (N lines per input)
  --alignments=hard       ... ||| 0-0 1-2 2-1   (Pharaoh source-target links, appended)
  --alignments=soft       one JSON object per hypothesis: index, rank, translation, score,
                          log_prob, source_tokens, target_tokens, attention [tgt][src]
  --output_format=jsonl   one JSON object per hypothesis: index, rank, translation, score,
                          log_prob, pieces, piece_log_probs, words, word_log_probs,
                          alignment (Pharaoh links); with --alignments=soft also the matrix
Over-long lines are cut to --max_input_tokens tokens and reported on stderr.

  --prefix_file=F         the start of each translation, line by line (an empty line: none).
                          The search continues from it; a prefix that does not end with a
                          space may have its last word completed ("Ein Hu" -> "Ein Hund").
  --constraints_file=F    one JSON list of target phrases per input line ([] or an empty
                          line: none): each phrase appears in the translation (lexically
                          constrained beam search with dynamic beam allocation).

Input errors (one `error:` line naming the line and the fix, exit code 2): a line that is
not valid UTF-8 or that holds a carriage return (old Mac `\\r` line endings; `\\r\\n` is
fine), as nmt_tf/data/text_files.py reads corpora. From --input_file nothing is translated:
the file is still there to fix and rerun. Stdin cannot be read again, so the lines before the
bad one are translated and written out (flushed) first, then the error is printed: the
output holds exactly the translations of the lines that were read.
"""

import json
import sys

from absl import flags

from nmt_tf import data
from nmt_tf import special_tokens
from nmt_tf import write_path
from nmt_tf.cli import common
from nmt_tf.data import target_tags
from nmt_tf.experiment.run_dir import RunDirError
from nmt_tf.inference import (alignments, CompiledTranslator, load_models, translate_lines,
                              Translator)
from nmt_tf.inference import shortlist as shortlist_lib
from nmt_tf.inference.batch_translate import EAGER_LINES

COMMAND = "translate"

flags.DEFINE_string("input_file", "-", "Source sentences, one per line ('-' = stdin).")
flags.DEFINE_string("output_file", "-", "Where translations go ('-' = stdout).")
flags.DEFINE_enum("alignments", "none", ["none", "soft", "hard"],
                  "Also print attention alignments: soft (JSON lines with the matrix) or hard "
                  "(Pharaoh i-j appended after ' ||| ').")
flags.DEFINE_bool("replace_unk", False, "Replace each output UNK by its most-attended source "
                  "word (Luong et al. 2015; word vocabularies only).")
flags.DEFINE_integer("max_input_tokens", 200, "Longer inputs are cut to this many tokens "
                     "(flagged on stderr).")
flags.DEFINE_bool("xla", False, "XLA-compile the search (tf.function(jit_compile=True)).")
flags.DEFINE_string("prefix_file", None, "The start of each translation, one line per input "
                    "line (an empty line for none); a prefix not ending with a space may have "
                    "its last word completed.")
flags.DEFINE_string("constraints_file", None, "One JSON list of target phrases per input line "
                    "([] or an empty line for none); every phrase appears in the "
                    "translation (lexically constrained beam search).")
flags.DEFINE_enum("output_format", "text", ["text", "jsonl"], "text: the translations (see "
                  "--nbest, --alignments); jsonl: one JSON object per hypothesis with its "
                  "pieces, words and their log-probabilities (confidence).")

FLAGS = flags.FLAGS


def build_translator():
  """(Translator, run config, decode config, checkpoint paths) from the flags."""
  model, config, src_tok, tgt_tok, paths = load_models(FLAGS.run_dir, FLAGS.checkpoint,
                                                       FLAGS.checkpoints, FLAGS.hard_inference)
  if config.model.encoder == "image":
    raise RunDirError(f"{FLAGS.run_dir} is a captioning run (model.encoder='image'); caption "
                      "images with `nmt-tf caption --input_file=IMAGE_OR_FOLDER`.")
  decode = common.decode_config(config)
  if FLAGS.max_input_tokens < 1:
    raise ValueError(f"Received --max_input_tokens={FLAGS.max_input_tokens}; expected a "
                     "positive integer.")
  shortlist = shortlist_lib.load_or_build(FLAGS.run_dir, decode, config.data, src_tok,
                                         tgt_tok)
  translator = Translator(model, src_tok, tgt_tok, decode, FLAGS.max_input_tokens,
                          shortlist=shortlist,
                          target_languages=target_tags.target_languages(config.data))
  if translator.precision_reason:
    print(f"precision: {translator.precision} ({translator.precision_reason})", file=sys.stderr)
  return translator, config, decode, paths


def read_stdin(stream=None):
  """Reads stdin (or `stream`) up to its first bad line.

  Returns:
    (lines, error): the lines before the first line that `data.decode_line` rejects (all of
    them when none is), and that DataError ("stdin line N: ...") or None.
  """
  stream = stream or sys.stdin
  binary = getattr(stream, "buffer", None)  # the bytes under a text stream
  raw_lines = binary if binary is not None else (line.encode("utf-8") for line in stream)
  lines = []
  try:
    for line_number, raw in enumerate(raw_lines, start=1):
      lines.append(data.decode_line(raw, "stdin", line_number))
  except data.DataError as error:
    return lines, error
  return lines, None


def read_input(path):
  """(lines, error) of `path` ('-' = stdin, see `read_stdin`); a file is read whole or
  raises DataError naming the file and the line."""
  if path == "-":
    return read_stdin()
  return data.read_lines(path, "translate input"), None


# Above this share of unknown source tokens the input is probably not the model's language.
UNKNOWN_SHARE_WARNING = 0.2


# Lines decoded at a time by `translate`: their translations are written before the next
# chunk is decoded, so an interrupted run keeps them (sorting by length stays within a chunk).
CHUNK_LINES = 1024


def decode_chunks(translator, decode, lines, log=None, chunk_lines=CHUNK_LINES, prefixes=None,
                  constraints=None):
  """Yields the SentenceResults of `lines` in input order, `chunk_lines` at a time (indices
  count from the first line); reports cut lines, and an input mostly unknown to the model, on
  `log` (default stderr). `prefixes`: optional start of each translation, one per line;
  `constraints`: optional list of phrases per line that the translation must contain."""
  log = log or sys.stderr
  eager = len(lines) <= EAGER_LINES and not FLAGS.xla  # faster than tracing the search
  compiled = CompiledTranslator(translator, decode.beam_size, decode.nbest, FLAGS.xla, eager)
  tokens = unknown = 0
  for start in range(0, len(lines), chunk_lines):
    results = translate_lines(compiled, lines[start:start + chunk_lines], decode.batch_size,
                              prefixes=None if prefixes is None
                              else prefixes[start:start + chunk_lines],
                              constraints=None if constraints is None
                              else constraints[start:start + chunk_lines])
    for r in results:
      r.index += start
      if r.truncated:
        print(f"warning: line {r.index + 1} has {r.num_tokens} tokens; cut to the first "
              f"{translator.max_source_length} (raise --max_input_tokens to keep more).",
              file=log)
      tokens += len(r.source_ids) - 1
      unknown += sum(i == special_tokens.UNK_ID for i in r.source_ids[:-1])
    yield results
  share = unknown / max(tokens, 1)
  if share > UNKNOWN_SHARE_WARNING:
    print(f"warning: {share:.0%} of the input's tokens are unknown to the model's source "
          "vocabulary; is the input in the language the run was trained on (its config.json, "
          "data section)?", file=log)


def decode_lines(translator, decode, lines, log=None):
  """Translates lines (as `decode_chunks`, in one chunk). Returns SentenceResults."""
  return [r for chunk in decode_chunks(translator, decode, lines, log, len(lines) or 1)
          for r in chunk]


def format_results(translator, results, nbest, mode, replace_unk, output_format="text"):
  """Yields output lines (see the module docstring)."""
  for r in results:
    hyps = r.hypotheses[:nbest] if r.hypotheses else [None]
    for rank, hyp in enumerate(hyps):
      if hyp is None:  # empty input line
        text, src_tokens, tgt_tokens, attention = "", [], [], []
        score = log_prob = 0.0
      else:
        text, src_tokens, tgt_tokens = alignments.hypothesis_view(translator, r, hyp,
                                                                    replace_unk)
        attention, score, log_prob = hyp.attention, hyp.score, hyp.log_prob
      if output_format == "jsonl" or mode == "soft":
        record = {"index": r.index, "rank": rank, "translation": text, "score": score,
                  "log_prob": log_prob}
        if output_format == "jsonl":
          record.update(_confidence(translator, hyp, tgt_tokens, replace_unk))
        if mode == "soft":
          record.update(alignments.soft_alignment(attention, src_tokens, tgt_tokens))
        yield json.dumps(record, ensure_ascii=False)
        continue
      line = f"{r.index} ||| {text} ||| {score:.4f} ||| {log_prob:.4f}" if nbest > 1 else text
      if mode == "hard":
        links = alignments.hard_alignment(attention) if hyp is not None else []
        line += " ||| " + alignments.pharaoh(links)
      yield line


def _confidence(translator, hyp, tgt_tokens, replace_unk):
  """The --output_format=jsonl fields of hypothesis `hyp` (None for an empty input line):
  its pieces (as the model emitted them, before any UNK replacement), words, their
  log-probabilities and its Pharaoh alignment."""
  if hyp is None:
    return {"pieces": [], "piece_log_probs": [], "words": [], "word_log_probs": [],
            "alignment": ""}
  pieces = (alignments.target_tokens(translator.target_tokenizer, hyp.ids) if replace_unk
            else tgt_tokens)
  return {"pieces": pieces, "piece_log_probs": [round(x, 4) for x in hyp.token_log_probs],
          "words": hyp.words, "word_log_probs": [round(x, 4) for x in hyp.word_log_probs],
          "alignment": alignments.pharaoh(alignments.hard_alignment(hyp.attention))}


@common.decoding_command
def run(argv):
  if argv:
    print(f"error: translate takes no positional arguments; received {argv}. Use "
          "--input_file.", file=sys.stderr)
    return 2
  try:
    if FLAGS.output_file != "-":
      write_path.check_output(FLAGS.output_file, inputs=[FLAGS.input_file] + [
          path for path in (FLAGS.prefix_file, FLAGS.constraints_file) if path])
    lines, input_error = read_input(FLAGS.input_file)
    if input_error is not None and not lines:
      raise input_error
    prefixes = read_prefixes(FLAGS.prefix_file, lines, input_error)
    constraints = read_constraints(FLAGS.constraints_file, lines, input_error)
    translator, _, decode, _ = build_translator()
    lines = translator.tag(lines, FLAGS.target_lang)
    if prefixes is not None:
      translator.check_prefix(prefixes, "--prefix_file line")
    if constraints is not None:
      translator.check_constraints(constraints, "--constraints_file line")
    replace_unk = FLAGS.replace_unk
    if replace_unk and not isinstance(translator.source_tokenizer, data.WordTokenizer):
      print("warning: --replace_unk needs word vocabularies (tokenizer.kind='word'); ignored.",
            file=sys.stderr)
      replace_unk = False
    code = write_translations(translator, decode, lines, replace_unk, prefixes, constraints)
  except common.USER_ERRORS as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  if code == 0 and input_error is not None:  # stdin: the lines before the bad one are written
    print(f"error: {input_error}", file=sys.stderr)
    return 2
  return code


def read_aligned(path, flag, lines, input_error, what, strip=True):
  """The lines of the file `path` given as `flag`, one per input line (`what` names a line's
  content for the error), else DataError. With a bad stdin line (`input_error`), the lines
  of those read before it are kept."""
  rows = data.read_lines(path, flag, strip=strip)
  if input_error is not None:
    rows = rows[:len(lines)]
  if len(rows) != len(lines):
    raise data.DataError(f"{flag} {path} has {len(rows)} lines and the input {len(lines)}; "
                         f"expected {what} per input line.")
  return rows


def read_prefixes(path, lines, input_error):
  """The lines of --prefix_file (None without it), whitespace kept: a trailing space says
  that the last word is complete."""
  if path is None:
    return None
  return read_aligned(path, "--prefix_file", lines, input_error,
                      "one prefix (an empty line for none)", strip=False)


def read_constraints(path, lines, input_error):
  """The phrases of each line of --constraints_file (None without it); DataError naming the
  line unless each line is a JSON list of strings (or empty)."""
  if path is None:
    return None
  constraints = []
  rows = read_aligned(path, "--constraints_file", lines, input_error,
                      "one JSON list of phrases ([] for none)")
  for number, row in enumerate(rows, start=1):
    try:
      phrases = json.loads(row) if row else []
    except ValueError as error:
      raise data.DataError(f"--constraints_file line {number}: not JSON ({error.msg}); "
                           'write a list of phrases such as ["ein Hund", "Ball"].') from None
    if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
      raise data.DataError(f"--constraints_file line {number}: {row[:60]!r} is not a JSON "
                           'list of strings; write a list such as ["ein Hund", "Ball"].')
    constraints.append(phrases)
  return constraints


def write_translations(translator, decode, lines, replace_unk, prefixes=None,
                       constraints=None):
  """Decodes `lines` chunk by chunk into --output_file, in order (common.write_lines: Ctrl-C
  or SIGTERM keeps the translations done so far); returns the exit code."""
  return common.write_lines(FLAGS.output_file, (
      line for results in decode_chunks(translator, decode, lines, prefixes=prefixes,
                                        constraints=constraints)
      for line in format_results(translator, results, decode.nbest, FLAGS.alignments,
                                 replace_unk, FLAGS.output_format)), "translate")
