"""translate / evaluate / score / average / export commands on a tiny untrained run."""

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from unittest import mock

from absl import flags
from absl.testing import flagsaver
import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import cli
from nmt_tf import cpu
from nmt_tf.cli import average as average_cli
from nmt_tf.cli import common
from nmt_tf.cli import evaluate as evaluate_cli
from nmt_tf.cli import export as export_cli
from nmt_tf.cli import score as score_cli
from nmt_tf.cli import translate as translate_cli
from nmt_tf.evaluation.scoring import corpus_bleu
from nmt_tf.experiment import RunDir
from nmt_tf.special_tokens import UNK_ID
from tests.run_fixtures import make_tiny_run, tiny_experiment
from tests.waits import SAFETY_NET

FLAGS = flags.FLAGS
RUN_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run.py")
cli.commands()  # imports every command module, as run.py does, so all flags are defined


def run_command(module, stdin=None, **flag_values):
  """Runs module.run([]) with flags set and `stdin` (str, or bytes read as a real stdin is)
  as stdin; returns (exit code, stdout, stderr)."""
  if not FLAGS.is_parsed():
    FLAGS.mark_as_parsed()
  # Fixed initializer seed: weights the checkpoint does not hold (see the report on
  # list/dict-held Keras 3 weights) are then the same in every load.
  keras.utils.set_random_seed(1234)
  out, err = io.StringIO(), io.StringIO()
  old_stdin = sys.stdin
  sys.stdin = (io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
               if isinstance(stdin, bytes) else io.StringIO(stdin or ""))
  try:
    with flagsaver.flagsaver(**flag_values), contextlib.redirect_stdout(out), \
        contextlib.redirect_stderr(err):
      code = module.run([])
  finally:
    sys.stdin = old_stdin
  return code, out.getvalue(), err.getvalue()


class DecodeFlagsTest(tf.test.TestCase):

  def test_precision(self):
    if not FLAGS.is_parsed():
      FLAGS.mark_as_parsed()
    config = tiny_experiment()
    self.assertEqual(common.decode_config(config).precision, "float32")
    for precision in ("float32_bf16_matmul", "auto"):
      with flagsaver.flagsaver(precision=precision):
        self.assertEqual(common.decode_config(config).precision, precision)


class DecodingProcessTest(tf.test.TestCase):

  def test_grappler_is_off_while_a_decoding_command_runs(self):
    def meta_optimizer_off():
      return tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)

    seen = []

    @common.decoding_command
    def run(argv):
      seen.append((argv, meta_optimizer_off()))
      return 3

    before = meta_optimizer_off()
    self.assertEqual(run(["x"]), 3)
    self.assertEqual(seen, [(["x"], True)])
    self.assertEqual(meta_optimizer_off(), before)  # training in the same process keeps it
    commands = cli.commands()
    for name in ("translate", "evaluate", "score", "caption", "serve"):
      self.assertTrue(hasattr(commands[name].run, "__wrapped__"), name)
    for name in ("train", "main", "export", "average"):
      self.assertFalse(hasattr(commands[name].run, "__wrapped__"), name)


@pytest.mark.slow  # trains two runs; the quick tier checks hard_inference on the layer
# (test_layers_attention.py) and on the cgru_hard model (test_models.py)
class HardInferenceFlagTest(tf.test.TestCase):
  """--hard_inference: a hard-attention run decoded with the expectation or the argmax."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.run_path = os.path.join(cls.tmp, "hard")
    _, _, corpus = make_tiny_run(cls.run_path, attention_mode="hard")
    cls.files = {}
    for name, lines in (("src", corpus["valid"].sources[:4]),
                        ("tgt", corpus["valid"].targets[:4])):
      cls.files[name] = os.path.join(cls.tmp, f"{name}.txt")
      with open(cls.files[name], "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)

  def score(self, run_path, **flag_values):
    code, out, err = run_command(score_cli, run_dir=run_path, source_file=self.files["src"],
                                 target_file=self.files["tgt"], **flag_values)
    return code, [float(line.split("\t")[0]) for line in out.splitlines()], err

  def test_the_model_decodes_with_the_context_named(self):
    self.assertEqual(RunDir(self.run_path).load_config().model.hard_inference, "expectation")
    code, default, err = self.score(self.run_path)
    self.assertEqual(code, 0, err)
    code, expectation, err = self.score(self.run_path, hard_inference="expectation")
    self.assertEqual(code, 0, err)
    code, argmax, err = self.score(self.run_path, hard_inference="argmax")
    self.assertEqual(code, 0, err)
    self.assertAllClose(expectation, default)
    # The untrained model's alpha is near uniform: its argmax annotation is no average.
    self.assertGreater(np.max(np.abs(np.array(argmax) - np.array(expectation))), 1e-3)
    model, config, _, _ = RunDir(self.run_path).load_model(hard_inference="argmax")
    self.assertEqual(config.model.hard_inference, "argmax")
    self.assertEqual(model.get_config()["config"]["hard_inference"], "argmax")
    code, out, err = run_command(translate_cli, run_dir=self.run_path, hard_inference="argmax",
                                 input_file=self.files["src"], beam_size=2)
    self.assertEqual(code, 0, err)
    self.assertLen(out.splitlines(), 4)

  def test_a_soft_attention_run_refuses_it(self):
    soft = os.path.join(self.tmp, "soft")
    make_tiny_run(soft)
    code, scores, err = self.score(soft, hard_inference="argmax")
    self.assertEqual(code, 2)
    self.assertEqual(scores, [])
    self.assertEqual(err, f"error: hard_inference='argmax' applies to hard attention, and "
                     f"{soft} was trained with model.attention_mode='soft'; leave "
                     "hard_inference out.\n")


@pytest.mark.slow  # ~3 min on 2 busy cores: every command loads the run and traces anew
class DecodeCommandsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.run_path = os.path.join(cls.tmp, "run")
    cls.tiny_run, cls.config, corpus = make_tiny_run(cls.run_path)
    cls.sources = list(corpus["valid"].sources[:4])
    cls.references = list(corpus["valid"].targets[:4])
    cls.lines = cls.sources[:2] + [""] + [cls.sources[2] + " zzqq " + cls.sources[3]]
    cls.src_file = cls.write("src.txt", cls.lines)
    cls.common = dict(run_dir=cls.run_path, beam_size=2, decode_batch_size=2)

  @classmethod
  def write(cls, name, lines):
    path = os.path.join(cls.tmp, name)
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(line + "\n" for line in lines)
    return path

  def translate(self, **flag_values):
    code, out, err = run_command(translate_cli, **{**self.common,
                                                   "input_file": self.src_file, **flag_values})
    self.assertEqual(code, 0, err)
    return out.splitlines(), err

  def test_plain_empty_and_cut_lines(self):
    out, err = self.translate(max_input_tokens=6)
    self.assertLen(out, len(self.lines))
    self.assertEqual(out[2], "")
    self.assertTrue(all(out[i] for i in (0, 1, 3)))
    self.assertRegex(err, r"line 4 has \d+ tokens; cut to the first 6")
    self.assertNotIn("line 1 ", err)

  def test_auto_precision_is_printed_and_searches_as_its_choice(self):
    out, err = self.translate()
    self.assertNotIn("precision:", err)  # the run's float32: nothing to decide
    with mock.patch.object(cpu, "cpu_info", return_value={"flags": {"avx2"}}):
      auto, err = self.translate(precision="auto")
    self.assertIn("precision: float32 (auto: this CPU has no AVX512_BF16 or AMX-BF16)", err)
    self.assertEqual(auto, out)

  def test_input_mostly_unknown_to_the_model_is_flagged_once(self):
    _, err = self.translate()
    self.assertNotIn("unknown to the model", err)
    foreign = self.write("foreign.txt", ["ein kleiner hund läuft über die straße",
                                          "zwei katzen schlafen"])
    _, err = self.translate(input_file=foreign)
    self.assertEqual(err.count("of the input's tokens are unknown to the model's source "
                               "vocabulary"), 1)

  def test_stdin_matches_file(self):
    code, out, err = run_command(translate_cli, stdin="\n".join(self.lines) + "\n",
                                 **self.common, input_file="-")
    self.assertEqual(code, 0, err)
    self.assertEqual(out.splitlines(), self.translate()[0])

  def test_nbest_format(self):
    out, _ = self.translate(nbest=2)
    pattern = re.compile(r"^(\d+) \|\|\| (.*) \|\|\| (-?\d+\.\d+) \|\|\| (-?\d+\.\d+)$")
    rows = [pattern.match(line) for line in out]
    self.assertTrue(all(rows), out)
    by_sentence = {}
    for m in rows:
      by_sentence.setdefault(int(m.group(1)), []).append(float(m.group(3)))
    self.assertEqual(sorted(by_sentence), [0, 1, 2, 3])
    self.assertLen(by_sentence[2], 1)  # the empty line
    for i in (0, 1, 3):
      self.assertLen(by_sentence[i], 2)
      self.assertGreaterEqual(by_sentence[i][0], by_sentence[i][1])

  def test_alignments(self):
    hard, _ = self.translate(alignments="hard")
    soft, _ = self.translate(alignments="soft")
    self.assertLen(hard, len(self.lines))
    self.assertLen(soft, len(self.lines))
    for h, s in zip(hard, soft):
      text, links = h.split(" ||| ")
      record = json.loads(s)
      self.assertEqual(record["translation"], text)
      attention = np.array(record["attention"])
      if not text:
        self.assertEqual(links, "")
        continue
      self.assertEqual(attention.shape, (len(record["target_tokens"]),
                                         len(record["source_tokens"])))
      self.assertAllClose(attention.sum(axis=1), np.ones(len(attention)), atol=1e-3)
      self.assertEqual(record["target_tokens"][-1], "</s>")
      self.assertEqual(record["source_tokens"][-1], "</s>")
      # The JSON rounds weights to 4 decimals, so near-ties of an untrained model may round to
      # equal values: a link may point at any position within rounding of the row's maximum.
      eos = attention.shape[1] - 1
      linked = {}
      for link in links.split():
        i, j = map(int, link.split("-"))
        self.assertNotIn(j, linked)
        linked[j] = i
      for j, row in enumerate(attention[:-1]):
        best = _near_argmax(row)
        if j in linked:
          self.assertIn(linked[j], best)
          self.assertNotEqual(linked[j], eos)
        else:
          self.assertIn(eos, best)  # unlinked: the most-attended position is EOS

  def test_unk_replacement(self):
    # A checkpoint whose output layer prefers UNK: every token but the forced EOS is UNK.
    model, _, _, _ = self.tiny_run.load_model()
    bias = model.decoder.output_layer.output_bias
    bias.assign(tf.tensor_scatter_nd_update(bias, [[UNK_ID]], [50.0]))
    checkpoint = tf.train.Checkpoint(model=model)
    _ = checkpoint.save_counter  # RunDir.load_model expects it in the checkpoint
    prefix = checkpoint.write(os.path.join(self.tmp, "unk", "ckpt"))
    plain, _ = self.translate(checkpoint=prefix, beam_size=1, alignments="soft")
    replaced, _ = self.translate(checkpoint=prefix, beam_size=1, alignments="soft",
                                 replace_unk=True)
    self.assertIn("<unk>", json.loads(plain[0])["translation"])
    for line in replaced:
      record = json.loads(line)
      if not record["translation"]:
        continue
      self.assertNotIn("<unk>", record["translation"])
      attention = np.array(record["attention"])
      words = record["source_tokens"][:-1]
      output = record["translation"].split()
      self.assertLen(output, len(attention) - 1)
      for word, row in zip(output, attention[:-1]):
        self.assertIn(word, {words[i] for i in _near_argmax(row[:len(words)])})
    self.assertIn("zzqq", json.loads(replaced[3])["source_tokens"])  # OOV words are copied

  def test_ensemble(self):
    ckpts = [self.tiny_run.checkpoint_path("last"), self.tiny_run.checkpoint_path("best")]
    out, _ = self.translate(checkpoints=ckpts)
    self.assertLen(out, len(self.lines))
    other = os.path.join(self.tmp, "other")
    make_tiny_run(other, seed=1, decoder="rnnsearch")
    out, _ = self.translate(checkpoints=[ckpts[0], other])  # same vocab, other model
    self.assertLen(out, len(self.lines))

  def test_export_errors_are_one_line(self):
    code, out, err = run_command(export_cli, run_dir=os.path.join(self.tmp, "nothing"))
    self.assertEqual((code, out), (2, ""))
    self.assertLen(err.strip().splitlines(), 1)
    self.assertIn("No config.json", err)
    flipped = os.path.join(self.tmp, "reversed")  # same weights and vocabularies
    shutil.copytree(self.run_path, flipped)
    with open(os.path.join(flipped, "config.json"), encoding="utf-8") as f:
      config = json.load(f)
    config["pipeline"]["reverse_source"] = True  # a setting that no longer exists
    with open(os.path.join(flipped, "config.json"), "w", encoding="utf-8") as f:
      json.dump(config, f)
    code, _, err = run_command(export_cli, run_dir=self.run_path,
                               checkpoints=[self.run_path, flipped])
    self.assertEqual(code, 2)
    self.assertLen(err.strip().splitlines(), 1)
    self.assertIn("pipeline.reverse_source=True is no longer a setting: delete it (from the "
                  "run's config.json too) and set model.reverse_source=True", err)
    code, _, err = run_command(export_cli, run_dir=self.run_path,
                               checkpoints=[self.run_path, flipped], shortlist=5)
    self.assertEqual(code, 2)
    self.assertIn("decode.shortlist=5 is not exported; the export searches the whole "
                  "vocabulary", err)

  def test_damaged_checkpoint_is_one_line(self):
    for damage in ("truncated", "flipped"):
      damaged = os.path.join(self.tmp, f"damaged_{damage}")
      shutil.copytree(self.run_path, damaged)
      data_file = [os.path.join(damaged, "best", name) for name in
                   os.listdir(os.path.join(damaged, "best")) if ".data-" in name][0]
      size = os.path.getsize(data_file)
      with open(data_file, "r+b") as f:
        if damage == "truncated":  # the reader raised IndexError, a traceback, before
          f.truncate(size // 2)
        else:  # checksum mismatch
          f.seek(size // 2)
          f.write(b"\xff" * 64)
      code, out, err = run_command(translate_cli, **{**self.common, "run_dir": damaged},
                                   input_file=self.src_file)
      self.assertEqual((code, out), (2, ""), damage)
      self.assertLen(err.strip().splitlines(), 1, err)
      self.assertRegex(err, r"^error: Checkpoint .*best/ckpt-\d+ is corrupt .* pass "
                       r"--checkpoint=last")
      prefix = data_file.split(".data-")[0]
      code, out, err = run_command(average_cli, run_dir=damaged, checkpoints=[prefix])
      self.assertEqual((code, out), (2, ""), damage)
      self.assertLen(err.strip().splitlines(), 1, err)
      self.assertRegex(err, r"^error: Checkpoint .*best/ckpt-\d+ is corrupt .* leave it out")

  def test_bad_input_file(self):
    code, out, err = run_command(translate_cli, **self.common,
                                 input_file=os.path.join(self.tmp, "missing.txt"))
    self.assertEqual(code, 2)
    self.assertEqual(out, "")
    self.assertIn("missing.txt", err)
    self.assertIn("file not found", err)

  def test_bad_stdin_bytes_keep_the_lines_before(self):
    good = "".join(line + "\n" for line in self.sources[:2]).encode()
    stdin = good + b"ein \xff Hund\n" + self.sources[2].encode() + b"\n"
    code, out, err = run_command(translate_cli, stdin=stdin, **self.common, input_file="-")
    self.assertEqual(code, 2)
    self.assertLen(err.strip().splitlines(), 1, err)
    self.assertRegex(err, r"^error: stdin line 3: not valid UTF-8 \(byte 0xff at column 5\); "
                     r"re-encode the input as UTF-8")
    code, expected, _ = run_command(translate_cli, stdin=good, **self.common, input_file="-")
    self.assertEqual(code, 0)
    self.assertLen(expected.splitlines(), 2)
    self.assertEqual(out, expected)  # the lines before the bad one, translated
    code, out, err = run_command(translate_cli, stdin=b"\xc3(\n" + good, **self.common,
                                 input_file="-")
    self.assertEqual((code, out), (2, ""))
    self.assertRegex(err, r"^error: stdin line 1: not valid UTF-8 \(byte 0xc3 at column 1\)")

  def test_a_beam_too_wide_for_the_memory_is_refused(self):
    common = dict(self.common, beam_size=10**9)
    for module, flags_ in ((translate_cli, dict(input_file=self.src_file)),
                           (evaluate_cli, dict(source_file=self.src_file,
                                               reference_file=self.src_file)),
                           (export_cli, dict(export_dir=os.path.join(self.tmp, "wide")))):
      code, out, err = run_command(module, **common, **flags_)
      self.assertEqual((code, out), (2, ""), err)
      self.assertLen(err.strip().splitlines(), 1, err)
      self.assertRegex(err, r"^error: Received beam_size=1000000000: its search of one "
                       r"\d+-token sentence would need about [\d,.]+ GiB, more than half of "
                       r"the [\d.]+ GiB of memory available; use a smaller beam")

  def test_carriage_return_line_endings_of_the_input(self):
    mac = "".join(line + "\r" for line in self.sources[:3]).encode()
    path = os.path.join(self.tmp, "mac.txt")
    with open(path, "wb") as f:
      f.write(mac)
    for name, flag_values in (("stdin", dict(stdin=mac, input_file="-")),
                              (path, dict(input_file=path))):
      code, out, err = run_command(translate_cli, **self.common, **flag_values)
      self.assertEqual((code, out), (2, ""), err)
      self.assertLen(err.strip().splitlines(), 1, err)
      self.assertRegex(err, rf"^error: {re.escape(name)} line 1: old Mac line endings: the "
                       r"whole input is one line with 3 carriage returns .*dos2unix -c mac")
    dos = "".join(line + "\r\n" for line in self.lines).encode()
    code, out, err = run_command(translate_cli, stdin=dos, **self.common, input_file="-")
    self.assertEqual(code, 0, err)
    self.assertEqual(out.splitlines(), self.translate()[0])

  def test_bad_stdin_from_the_command_line(self):
    """`run.py translate` as a process: the translations of the lines before the bad one on
    stdout, one `error:` line on stderr, exit code 2, no traceback."""
    stdin = "".join(line + "\n" for line in self.sources[:2]).encode() + b"caf\xe9\n"
    proc = subprocess.run(
        [sys.executable, RUN_PY, "translate", f"--run_dir={self.run_path}", "--beam_size=2"],
        input=stdin, capture_output=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=SAFETY_NET, check=False)
    stderr = proc.stderr.decode("utf-8", "replace")
    self.assertEqual(proc.returncode, 2, stderr[-2000:])
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    self.assertEqual(errors, ["error: stdin line 3: not valid UTF-8 (byte 0xe9 at column 4); "
                              "re-encode the input as UTF-8, e.g. `iconv -f latin1 -t utf-8`."])
    self.assertNotIn("Traceback", stderr)
    self.assertLen(proc.stdout.decode("utf-8").splitlines(), 2)

  def test_damaged_vocabulary_is_one_line(self):
    damaged = os.path.join(self.tmp, "damaged_vocab")
    shutil.copytree(self.run_path, damaged)
    manifest = os.path.join(damaged, "vocab", "tokenizers.json")
    for content in (b"", b"{not json"):
      with open(manifest, "wb") as f:
        f.write(content)
      code, out, err = run_command(translate_cli, **{**self.common, "run_dir": damaged},
                                   input_file=self.src_file)
      self.assertEqual((code, out), (2, ""))
      self.assertLen(err.strip().splitlines(), 1, err)
      self.assertRegex(err, rf"^error: {re.escape(manifest)} is empty or not valid JSON "
                       r"\(.+\); restore it from a backup or retrain the tokenizers in a new "
                       r"--run_dir")

  def test_shortlist(self):
    run = os.path.join(self.tmp, "shortlisted")
    shutil.copytree(self.run_path, run)
    table = os.path.join(run, "shortlist.npz")
    out, err = self.translate(run_dir=run, shortlist=3)
    self.assertIn("shortlist: counting the co-occurrences of the training data", err)
    self.assertTrue(os.path.exists(table))
    self.assertLen(out, len(self.lines))
    self.assertEqual(out[2], "")
    self.assertEqual(self.translate(run_dir=run, shortlist=3)[0], out)  # the kept table
    ensemble, _ = self.translate(run_dir=run, shortlist=3, checkpoints=[
        RunDir(run).checkpoint_path("last"), RunDir(run).checkpoint_path("best")])
    self.assertEqual(ensemble, out)  # two copies of the same weights
    full, _ = self.translate(run_dir=run)
    self.assertEqual(self.translate(run_dir=run, shortlist=100, shortlist_frequent=10**6)[0],
                     full)  # every word in the shortlist: the full search
    with open(table, "wb") as f:
      f.write(b"not a table")
    code, out, err = run_command(translate_cli, **{**self.common, "run_dir": run},
                                 input_file=self.src_file, shortlist=3)
    self.assertEqual((code, out), (2, ""))
    self.assertLen(err.strip().splitlines(), 1, err)
    self.assertRegex(err, rf"^error: {re.escape(table)} is unreadable \(.+\); move it away so "
                     "that the next call rebuilds it")
    code, _, err = run_command(translate_cli, **{**self.common, "run_dir": run},
                               input_file=self.src_file, shortlist=101)
    self.assertEqual(code, 2)
    self.assertIn("decode.shortlist=101; expected 0 (off) to 100", err)

  def test_evaluate(self):
    ref_file = self.write("ref.txt", self.references)
    src_file = self.write("eval_src.txt", self.sources)
    eval_dir = os.path.join(self.tmp, "eval")
    code, out, err = run_command(evaluate_cli, **self.common, source_file=src_file,
                                 reference_file=ref_file, eval_dir=eval_dir,
                                 plot_sentences=["0", "3", "99"], length_bucket_width=4)
    self.assertEqual(code, 0, err)
    self.assertIn("BLEU  = ", out)
    self.assertIn("nrefs:1", out)
    with open(os.path.join(eval_dir, "report.json"), encoding="utf-8") as f:
      report = json.load(f)
    self.assertEqual(report["sentences"], 4)
    self.assertIn("nrefs:1", report["chrf_signature"])
    with open(os.path.join(eval_dir, "hypotheses.txt"), encoding="utf-8") as f:
      hypotheses = f.read().splitlines()
    self.assertAllClose(report["bleu_length_ratio"],
                        corpus_bleu(hypotheses, self.references).length_ratio)
    lowercased = corpus_bleu(hypotheses, self.references, lowercase=True)
    self.assertAllClose(report["bleu_lowercase"], lowercased.score)
    self.assertEqual(report["bleu_lowercase_signature"], lowercased.signature)
    self.assertIn(f"BLEU lowercased = {lowercased.score:.2f}  ({lowercased.signature})", out)
    self.assertIn(f"(length ratio {report['bleu_length_ratio']:.3f}; ", out)
    self.assertEqual(sum(b["sentences"] for b in report["bleu_by_length"]), 4)
    for name in ("hypotheses.txt", "bleu_by_length.png", "attention_0.png", "attention_3.png"):
      self.assertTrue(os.path.isfile(os.path.join(eval_dir, name)), name)
    self.assertFalse(os.path.exists(os.path.join(eval_dir, "attention_99.png")))
    with open(os.path.join(eval_dir, "bleu_by_length.png"), "rb") as f:
      self.assertEqual(f.read(4), b"\x89PNG")

  def test_evaluate_default_split(self):
    code, out, err = run_command(evaluate_cli, **self.common, eval_split="valid",
                                 plot_sentences=[])
    self.assertEqual(code, 0, err)
    with open(os.path.join(self.run_path, "eval", "valid", "report.json")) as f:
      self.assertEqual(json.load(f)["sentences"],
                       RunDir(self.run_path).load_config().data.valid_size)

  def test_score(self):
    tgt_file = self.write("tgt.txt", self.references)
    src_file = self.write("score_src.txt", self.sources)
    code, out, err = run_command(score_cli, **self.common, source_file=src_file,
                                 target_file=tgt_file)
    self.assertEqual(code, 0, err)
    rows = [line.split("\t") for line in out.splitlines()]
    self.assertLen(rows, 4)
    model, _, _, tgt_tok = self.tiny_run.load_model()
    del model
    for (log_prob, tokens, per_token), ref in zip(rows, self.references):
      self.assertEqual(int(tokens), len(tgt_tok.encode(ref)) + 1)  # + EOS
      self.assertLess(float(log_prob), 0.0)
      self.assertAlmostEqual(float(per_token), float(log_prob) / int(tokens), places=4)
    self.assertIn("perplexity", err)
    # Forced decoding of the search's own output gives the log-probability it reported.
    out, _ = self.translate(input_file=src_file, nbest=2)
    best = {}
    for line in out:
      index, text, _, log_prob = line.split(" ||| ")
      best.setdefault(int(index), (text, float(log_prob)))
    hyp_file = self.write("hyp.txt", [best[i][0] for i in range(4)])
    code, out, err = run_command(score_cli, **self.common, source_file=src_file,
                                 target_file=hyp_file)
    self.assertEqual(code, 0, err)
    forced = [float(line.split("\t")[0]) for line in out.splitlines()]
    self.assertAllClose(forced, [best[i][1] for i in range(4)], atol=2e-3)
    code, _, err = run_command(score_cli, **self.common, source_file=src_file,
                               target_file=self.write("short.txt", self.references[:3]))
    self.assertEqual(code, 2)
    self.assertIn("expected one translation per source line", err)

  def test_average(self):
    path = os.path.join(self.tmp, "avg_run")
    run, _, _ = make_tiny_run(path)
    model, _, _, _ = run.load_model("last")
    for variable in model.weights:  # a second checkpoint with other weights
      variable.assign(variable + 1.0)
    first = run.checkpoint_path("last")
    checkpoint = tf.train.Checkpoint(model=model)
    _ = checkpoint.save_counter  # as in the trainer's checkpoints
    second = checkpoint.write(os.path.join(run.checkpoint_dir, "ckpt-2"))
    tf.compat.v1.train.update_checkpoint_state(run.checkpoint_dir, second,
                                     all_model_checkpoint_paths=[first, second])
    paths = tf.train.get_checkpoint_state(run.checkpoint_dir).all_model_checkpoint_paths
    self.assertLen(paths, 2)
    code, out, err = run_command(average_cli, run_dir=path, average_last=2)
    self.assertEqual(code, 0, err)
    output = os.path.join(path, "averaged", "ckpt-avg")
    self.assertIn(output, out)
    readers = [tf.train.load_checkpoint(p) for p in list(paths) + [output]]
    names = [n for n, _ in tf.train.list_variables(output) if n.startswith("model/")]
    self.assertNotEmpty(names)
    for name in names:
      a, b, avg = (r.get_tensor(name) for r in readers)
      self.assertAllClose(avg, (a + b) / 2, atol=1e-6)
    run.load_model(output)  # RunDir.load_model reads it
    # Into a run another process trains: refused before any work; outside the run: written.
    trainer = subprocess.Popen(["sleep", "60"])
    try:
      with open(os.path.join(path, "train.lock"), "w", encoding="utf-8") as f:
        json.dump({"pid": trainer.pid, "host": socket.gethostname(), "started": "x"}, f)
      before = os.path.getmtime(output + ".index")
      code, _, err = run_command(average_cli, run_dir=path, average_last=2)
      self.assertEqual(code, 2)
      self.assertIn(f"is being trained by process {trainer.pid}", err)
      self.assertEqual(os.path.getmtime(output + ".index"), before)
      outside = os.path.join(self.tmp, "outside", "avg")
      code, out, err = run_command(average_cli, run_dir=path, average_last=2,
                                   average_output=outside)
      self.assertEqual(code, 0, err)
    finally:
      trainer.kill()
      trainer.wait()
      os.remove(os.path.join(path, "train.lock"))
    code, _, err = run_command(average_cli, run_dir=os.path.join(self.tmp, "nothing"))
    self.assertEqual(code, 2)
    self.assertIn("No checkpoint", err)


def _near_argmax(row, tolerance=1.5e-4):
  """Positions whose (4-decimal rounded) weight is within rounding of the row's maximum."""
  row = np.asarray(row)
  return set(np.flatnonzero(row >= row.max() - tolerance).tolist())


if __name__ == "__main__":
  tf.test.main()

