"""The Multi30k study end to end on a tiny run: `study.py row` trains and evaluates through the
`nmt-tf` command line and records the row, `record` makes an immutable record of a run
directory, `report` draws the results page from the records alone."""

import contextlib
import gzip
import hashlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import pytest
import sacrebleu
import tensorflow as tf

import page
import records

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUDY = os.path.join(HERE, "study.py")

CONFIG = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


def study(*args):
  """(exit code, stdout, stderr) of `python study.py ARGS`."""
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run([sys.executable, STUDY] + list(args), capture_output=True, text=True,
                        env=env, cwd=ROOT, check=False)
  return done.returncode, done.stdout, done.stderr


@pytest.mark.slow  # trains a tiny model and decodes its test split twice (~1 min)
class StudyTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # pylint: disable-next=g-import-not-at-top
    from tests.training_fixtures import tiny_train_config
    cls.tmp = tempfile.mkdtemp()
    cls.rows = os.path.join(cls.tmp, "rows")
    cls.run_dir = os.path.join(cls.tmp, "run")
    config = tiny_train_config(steps=20, eval_every=10, checkpoint_every=10)
    cls.config_file = os.path.join(cls.tmp, "tiny.py")
    with open(cls.config_file, "w", encoding="utf-8") as f:
      f.write(CONFIG.format(text=config.to_json()))
    cls.row = study("row", "tiny_a", f"--config={cls.config_file}", f"--run_dir={cls.run_dir}",
                    f"--rows={cls.rows}", "--keep_attention", "--",
                    "--config.train.max_minutes=0")
    cls.record = study("record", "tiny_b", f"--run_dir={cls.run_dir}", f"--rows={cls.rows}",
                       "--command=nmt-tf train --config=tiny.py", "--baseline=tiny_a",
                       "--note=The same run recorded twice.")
    cls.variant = study("variant", "tiny_avg", "--of=tiny_a", f"--run_dir={cls.run_dir}",
                        f"--rows={cls.rows}", "--average_last=2", "--length_penalty=1.0",
                        "--note=The mean of the last two checkpoints.")

  def load(self, name):
    with open(os.path.join(self.rows, name, records.ROW_FILE), encoding="utf-8") as f:
      return json.load(f)

  def test_row_trains_evaluates_and_records(self):
    self.assertEqual(self.row[0], 0, self.row[2][-3000:])
    row = self.load("tiny_a")
    self.assertEqual(row["name"], "tiny_a")
    self.assertEqual(row["model"], "cgru")
    self.assertEqual(row["direction"], "generated")  # no languages: the dataset's name
    self.assertEqual(row["stop"], {"steps": 20})
    self.assertEqual(row["train"]["steps"], 20)
    self.assertGreater(row["train"]["seconds"], 0)
    self.assertGreater(row["train"]["tokens_per_second"], 0)
    self.assertEqual([p["step"] for p in row["validation"]], [10, 20])
    self.assertIsNotNone(row["validation"][0]["minutes"])
    log_every = row["config"]["train"]["log_every"]
    self.assertEqual([p["step"] for p in row["losses"]], list(range(log_every, 21, log_every)))
    self.assertAllGreater([p["loss"] for p in row["losses"]], 0.0)
    self.assertEqual(sorted(row["scores"]), ["beam5", "greedy"])
    self.assertEqual(row["scores"]["greedy"]["beam_size"], 1)
    self.assertEqual(row["scores"]["beam5"]["beam_size"], 5)
    self.assertIn("nrefs:1", row["scores"]["beam5"]["bleu_signature"])
    self.assertEqual(row["test_sentences"], 8)
    self.assertEqual(row["config"]["model"]["decoder"], "cgru")
    self.assertEqual(row["corpus"]["train"]["pairs"], 600)  # the generated pair's fingerprint
    self.assertEqual(row["machine"], records.machine())
    self.assertTrue(row["command"].startswith("nmt-tf train --config="))
    self.assertIsNone(row["baseline"])
    for key in ("greedy", "beam5"):
      with open(os.path.join(self.rows, "tiny_a", "eval", f"test_{key}", "hypotheses.txt"),
                encoding="utf-8") as f:
        self.assertLen(f.read().splitlines(), 8)
    self.assertNotEmpty(records.attention_images({"path": os.path.join(self.rows, "tiny_a")}))

  def test_a_recorded_row_is_not_run_again(self):
    code, out, _ = study("row", "tiny_a", f"--config={self.config_file}",
                         f"--run_dir={os.path.join(self.tmp, 'elsewhere')}",
                         f"--rows={self.rows}")
    self.assertEqual(code, 0)
    self.assertIn("recorded already", out)
    self.assertFalse(os.path.exists(os.path.join(self.tmp, "elsewhere")))

  def test_records_are_never_rewritten(self):
    self.assertEqual(self.record[0], 0, self.record[2][-3000:])
    before = self.load("tiny_b")
    code, _, err = study("record", "tiny_b", f"--run_dir={self.run_dir}", f"--rows={self.rows}",
                         "--command=other")
    self.assertEqual(code, 2)
    self.assertEqual(len(err.strip().splitlines()), 1, err)
    self.assertStartsWith(err, "error: ")
    self.assertIn("never rewritten", err)
    self.assertEqual(self.load("tiny_b"), before)
    self.assertEqual(before["baseline"], "tiny_a")
    self.assertEqual(records.attention_images({"path": os.path.join(self.rows, "tiny_b")}), [])

  def test_variant_decodes_the_mean_of_the_last_checkpoints(self):
    self.assertEqual(self.variant[0], 0, self.variant[2][-3000:])
    row, base = self.load("tiny_avg"), self.load("tiny_a")
    self.assertEqual(row["baseline"], "tiny_a")
    self.assertEqual(row["command"], base["command"])  # trained by the same command
    self.assertEqual(row["decoding"]["average_last"], 2)
    self.assertEqual(row["decoding"]["length_penalty"], 1.0)
    self.assertIn("study.py variant tiny_avg --of=tiny_a", row["decoding"]["command"])
    self.assertEqual(row["scores"]["beam5"]["length_penalty"], 1.0)
    self.assertEqual(row["train"], base["train"])
    self.assertTrue(os.path.exists(os.path.join(self.run_dir, "averaged", "tiny_avg",
                                                "ckpt-avg.index")))
    for key in ("greedy", "beam5"):
      self.assertTrue(os.path.exists(os.path.join(self.run_dir, "eval", "tiny_avg",
                                                  f"test_{key}", "report.json")))
      self.assertTrue(os.path.exists(records.hypotheses_path(
          {"path": os.path.join(self.rows, "tiny_avg")}, key)))
    code, out, _ = study("variant", "tiny_avg", "--of=tiny_a", f"--run_dir={self.run_dir}",
                         f"--rows={self.rows}")
    self.assertEqual(code, 0)
    self.assertIn("recorded already", out)

  def test_errors_are_one_line(self):
    for args in (["record", "x", f"--run_dir={os.path.join(self.tmp, 'missing')}",
                  f"--rows={self.rows}", "--command=c"],
                 ["record", "../x", f"--run_dir={self.run_dir}", f"--rows={self.rows}",
                  "--command=c"],
                 ["row", "y", f"--config={self.config_file}", f"--rows={self.rows}",
                  "--baseline=no_such_row"],
                 ["variant", "y", "--of=no_such_row", f"--run_dir={self.run_dir}",
                  f"--rows={self.rows}"]):
      code, _, err = study(*args)
      self.assertEqual(code, 2, args)
      self.assertEqual(len(err.strip().splitlines()), 1, err)
      self.assertStartsWith(err, "error: ")
    self.assertFalse(os.path.exists(os.path.join(self.rows, "y")))

  def test_report_from_records_alone(self):
    self.assertEqual(self.record[0], 0, self.record[2][-3000:])
    page_file = os.path.join(self.tmp, "RESULTS.md")
    figures = os.path.join(self.tmp, "results")
    os.makedirs(figures, exist_ok=True)
    with open(os.path.join(figures, "curves_old-direction.png"), "wb") as f:
      f.write(b"stale")
    with open(page_file, "w", encoding="utf-8") as f:
      f.write(f"# Results\n\nhand-written\n\n{page.BEGIN}\nold\n{page.END}\n\nafter\n")
    code, _, err = study("report", f"--rows={self.rows}", f"--page={page_file}",
                         f"--figures={figures}")
    self.assertEqual(code, 0, err[-3000:])
    with open(page_file, encoding="utf-8") as f:
      text = f.read()
    self.assertStartsWith(text, "# Results\n\nhand-written\n\n")
    self.assertEndsWith(text, f"{page.END}\n\nafter\n")
    self.assertNotIn("\nold\n", text)
    self.assertEqual(text.count("### generated: test split (8 sentences)"), 1)  # one table
    comparison = next(line for line in text.splitlines()
                      if line.startswith("| `tiny_b` | `tiny_a` |"))  # against its baseline
    # The same outputs: no paired test, which would give p = 1 / 1,001.
    self.assertIn("| +0.00 | same outputs | +0.00 | same outputs |", comparison)
    # A compared row's note is in its comparison, not under the rows table.
    self.assertIn("| The same run recorded twice. |", comparison)
    self.assertNotIn("- `tiny_b`:", text)
    self.assertIn("| `tiny_avg` | cgru; mean of the last 2 checkpoints, length penalty 1 |",
                  text)
    self.assertTrue(any(line.startswith("| `tiny_avg` | `tiny_a` |")
                        for line in text.splitlines()))
    self.assertIn("Each row's exact command is in its record", text)
    self.assertEqual(sorted(os.listdir(figures)),
                     ["attention_0.png", "attention_1.png", "attention_2.png",
                      "bleu_by_length_word.png", "curves_generated.png"])  # not the stale one
    self.assertIn("](results/curves_generated.png)", text)

  def test_report_refuses_a_missing_baseline(self):
    self.assertEqual(self.record[0], 0, self.record[2][-3000:])
    rows = os.path.join(self.tmp, "rows_without_baseline")
    os.makedirs(rows)
    os.symlink(os.path.join(self.rows, "tiny_b"), os.path.join(rows, "tiny_b"))
    with self.assertRaisesRegex(records.RecordError, "baseline 'tiny_a' has no record"):
      records.load(rows)


class TuneTest(tf.test.TestCase):
  """`study.py tune` on the validation split, with `nmt-tf evaluate` replaced by a fake."""

  def test_grid_on_the_validation_split_and_the_best(self):
    import study  # pylint: disable=g-import-not-at-top
    run_dir = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, run_dir)
    calls = []

    def fake_nmt_tf(args):
      calls.append(args)
      flags = dict(a.lstrip("-").split("=", 1) for a in args[1:])
      beam, penalty = int(flags["beam_size"]), float(flags["length_penalty"])
      os.makedirs(flags["eval_dir"])
      with open(os.path.join(flags["eval_dir"], "report.json"), "w", encoding="utf-8") as f:
        json.dump({"bleu": 30 + beam - (penalty - 0.8) ** 2, "chrf": 50.0}, f)
      return 0

    with mock.patch.object(study, "_nmt_tf", fake_nmt_tf), \
        contextlib.redirect_stdout(io.StringIO()) as out:
      self.assertEqual(study.main(["tune", f"--run_dir={run_dir}", "--beams=5,8",
                                   "--length_penalties=0.6,0.8"]), 0)
    self.assertLen(calls, 4)
    self.assertTrue(all(c[0] == "evaluate" and "--eval_split=valid" in c for c in calls))
    self.assertIn("best: beam 8, length penalty 0.8 (valid BLEU 38.00)", out.getvalue())
    with open(os.path.join(run_dir, "eval", "tune", "tune.json"), encoding="utf-8") as f:
      tuned = json.load(f)
    self.assertEqual((tuned["split"], tuned["best"]["beam_size"]), ("valid", 8))
    calls.clear()
    with mock.patch.object(study, "_nmt_tf", fake_nmt_tf), \
        contextlib.redirect_stdout(io.StringIO()):
      study.main(["tune", f"--run_dir={run_dir}", "--beams=5,8", "--length_penalties=0.6,0.8"])
    self.assertEmpty(calls)  # every report is there: nothing decoded again


class PrecisionCheckTest(tf.test.TestCase):
  """`study.py row` refuses, before training, a row whose train.precision=auto would give this
  machine other matrix products than its baseline's; `nmt-tf` is replaced by a fake."""

  AVX2 = {"model_name": "AMD EPYC", "family": "25", "model": "1", "flags": {"avx2"}}
  AMX = {"model_name": "Intel Xeon", "family": "6", "model": "143", "flags": {"amx_bf16"}}

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, self.tmp)
    self.rows = os.path.join(self.tmp, "rows")
    os.makedirs(os.path.join(self.rows, "base"))
    with open(os.path.join(self.rows, "base", records.ROW_FILE), "w", encoding="utf-8") as f:
      json.dump({"train": {"precision": "float32_bf16_matmul"}}, f)
    self.config_file = os.path.join(self.tmp, "config.py")
    with open(self.config_file, "w", encoding="utf-8") as f:
      f.write(CONFIG.format(text=json.dumps({"train": {"precision": "float32"}})))

  def row(self, info, *args, config=None):
    """(exit code, stderr, [nmt-tf calls]) of `study.py row new --baseline=base ARGS` on a CPU
    described by `info`; the fake `nmt-tf train` fails, so that nothing is evaluated."""
    import study  # pylint: disable=g-import-not-at-top
    calls = []

    def fake_nmt_tf(command):
      calls.append(command)
      return 3

    argv = ["row", "new", f"--config={config or self.config_file}", "--baseline=base",
            f"--rows={self.rows}", f"--run_dir={os.path.join(self.tmp, 'run')}"] + list(args)
    with mock.patch.object(study, "_nmt_tf", fake_nmt_tf), \
        mock.patch.object(study.cpu, "cpu_info", return_value=info), \
        contextlib.redirect_stderr(io.StringIO()) as err:
      code = study.main(argv)
    return code, err.getvalue(), calls

  def test_auto_unlike_the_baseline_is_refused_before_training(self):
    code, err, calls = self.row(self.AVX2, "--", "--config.train.precision=auto")
    self.assertEqual((code, calls), (2, []))
    self.assertLen(err.splitlines(), 1)
    self.assertIn("would train with precision float32 (auto: this CPU has no AVX512_BF16", err)
    self.assertIn("pass --config.train.precision=float32_bf16_matmul after --", err)
    self.assertIn("this CPU emulates bfloat16 products", err)

  def test_auto_like_the_baseline_trains(self):
    code, _, calls = self.row(self.AMX, "--", "--config.train.precision=auto")
    self.assertEqual(code, 3)
    self.assertEqual(calls[0][0], "train")

  def test_an_explicit_precision_is_the_rows_own_setting(self):
    code, _, calls = self.row(self.AVX2, "--", "--config.train.precision=float32")
    self.assertEqual((code, len(calls)), (3, 1))
    code, _, calls = self.row(self.AVX2)  # the config file's float32
    self.assertEqual((code, len(calls)), (3, 1))

  def test_a_resumed_run_is_judged_by_its_own_config(self):
    os.makedirs(os.path.join(self.tmp, "run"))
    with open(os.path.join(self.tmp, "run", "config.json"), "w", encoding="utf-8") as f:
      json.dump({"train": {"precision": "auto"}}, f)
    self.assertEqual(self.row(self.AVX2)[0], 2)
    self.assertEqual(self.row(self.AMX)[0], 3)

  def test_a_recipe_reads_its_own_default(self):
    code, err, calls = self.row(self.AVX2, config="multi30k:cgru")  # train.precision=auto
    self.assertEqual((code, calls), (2, []), err)


class MachineTest(tf.test.TestCase):

  def test_cpu_as_plain_information(self):
    info = {"model_name": "AMD EPYC", "family": "25", "model": "17", "stepping": "1",
            "flags": {"avx2", "avx512f", "avx512_bf16"}}
    self.assertEqual(records.machine(info, cores=2),
                     "2 CPUs AMD EPYC (family 25, model 17, AVX512-BF16)")
    self.assertEqual(records.machine({}, cores=4), "4 CPUs")

  def test_cores_are_those_the_process_may_run_on(self):
    # A row run with `taskset -c 0` beside another row trained on one core.
    with mock.patch.object(os, "sched_getaffinity", return_value={0}, create=True):
      self.assertEqual(records.machine({"model_name": "AMD EPYC"}), "1 CPU AMD EPYC")
    with mock.patch.object(os, "sched_getaffinity", return_value={0, 1}, create=True):
      self.assertEqual(records.machine({"model_name": "AMD EPYC"}), "2 CPUs AMD EPYC")

  def test_stop(self):
    # pylint: disable=protected-access
    self.assertEqual(page._stop({"stop": {"steps": 2500}}), "2,500 steps")
    self.assertEqual(page._stop({"stop": {"minutes": 120.0}}), "2 h budget")
    self.assertEqual(page._stop({"stop": {"minutes": 45.0}}), "45 min budget")

  def test_validation_after_the_same_data(self):
    # pylint: disable=protected-access
    def row(batch_tokens, steps):
      config = {"pipeline": {"batch_tokens": batch_tokens}} if batch_tokens else None
      return {"config": config, "validation": [{"step": s, "bleu": 1.0} for s in steps]}
    base = row(4096, range(500, 3001, 500))
    self.assertEqual(page._same_data(row(4096, [500, 1000, 2500]), base), (2500, 2500))
    # Half-size batches: step 5,000 has seen the tokens of the baseline's step 2,500 (its
    # step 6,000 those of 3,000, which the baseline did not validate at).
    self.assertEqual(page._same_data(row(2048, range(500, 6001, 500)), row(4096, [2500])),
                     (5000, 2500))
    self.assertIsNone(page._same_data(row(2048, [500, 700]), base))  # 250 and 350: none
    # A record without its config (a row rebuilt from tables): equal steps.
    self.assertEqual(page._same_data(row(None, [1000, 2000]), base), (2000, 2000))


class PublishedScoringTest(tf.test.TestCase):
  """Rows beside published results: BLEU of lowercased text, from a record's score or from its
  stored outputs and the test references it was scored on."""

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, self.tmp)
    self.data = os.path.join(self.tmp, "data")
    os.makedirs(self.data)
    self.references = ["A dog runs on the grass.", "Two men play chess."]
    raw = gzip.compress("\n".join(self.references).encode() + b"\n")
    self.reference_file = os.path.join(self.data, "test_2016_flickr.en.gz")
    with open(self.reference_file, "wb") as f:
      f.write(raw)
    self.sha256 = hashlib.sha256(raw).hexdigest()

  def record(self, name, corpus=True, stored=None):
    path = os.path.join(self.tmp, "rows", name)
    os.makedirs(os.path.join(path, "eval", "test_beam5"))
    with open(records.hypotheses_path({"path": path}), "w", encoding="utf-8") as f:
      f.write("a dog runs on grass.\nTwo Men play chess.\n")
    record = {"name": name, "path": path, "dataset": "multi30k", "direction": "de-en",
              "model": "cgru", "tokenizer": "sentencepiece", "stop": {"steps": 2500},
              "scores": {"beam5": {"bleu_lowercase": stored}, "greedy": None}}
    if corpus:
      record["corpus"] = {"test": {"files": [
          {"path": "/elsewhere/test_2016_flickr.de.gz", "sha256": "0"},
          {"path": "/elsewhere/test_2016_flickr.en.gz", "sha256": self.sha256}]}}
    return record

  def test_from_outputs_and_references(self):
    want = sacrebleu.corpus_bleu(["a dog runs on grass.", "two men play chess."],
                                 [[r.lower() for r in self.references]]).score
    for corpus in (True, False):  # a fingerprint, or the Multi30k file of the target language
      record = self.record(f"row_{corpus}", corpus=corpus)
      references = records.test_references(record, self.data)
      self.assertEqual(references, self.references)
      self.assertAlmostEqual(records.lowercase_bleu(record, "beam5", references), want)
    self.assertEqual(records.lowercase_bleu(self.record("stored", stored=41.5), "beam5", None),
                     41.5)
    self.assertIsNone(records.lowercase_bleu(self.record("no_refs"), "beam5", None))
    self.assertIsNone(records.test_references(self.record("no_data"), None))

  def test_other_reference_bytes_are_not_used(self):
    record = self.record("changed")
    with open(self.reference_file, "wb") as f:
      f.write(gzip.compress(b"Other text.\nMore.\n"))
    self.assertIsNone(records.test_references(record, self.data))

  def test_table(self):
    # pylint: disable-next=protected-access
    lines = page._published([self.record("ours"), self.record("old", stored=None)], self.data)
    text = "\n".join(lines)
    self.assertIn("| Lample et al. 2018 (ICLR), Table 2, supervised row |", text)
    self.assertIn("| de-en | 38.38 | |", text)
    self.assertIn("| `ours` | cgru (sentencepiece) | sacrebleu, case:lc, 13a | de-en | n/a |",
                  text)  # no greedy outputs kept

  def test_table_keeps_the_recipes_rows(self):
    """A row within a time budget is listed whatever its baseline; an equal-step ablation
    and a decoding of a row, whose gains the paired tests give, are not."""
    base = self.record("base", stored=40.0)
    ablation = {**self.record("ablation", stored=40.5), "baseline": "base"}
    other_model = {**self.record("sar", stored=39.0), "baseline": "base", "model": "sar_avg"}
    hour = {**self.record("hour", stored=41.0), "baseline": "base", "stop": {"minutes": 60.0}}
    two_hours = {**self.record("two_hours", stored=42.0), "baseline": "hour",
                 "stop": {"minutes": 120.0}}
    decoding = {**self.record("hour_avg3", stored=41.5), "baseline": "hour",
                "stop": {"minutes": 60.0}, "decoding": {"average_last": 3}}
    # pylint: disable-next=protected-access
    text = "\n".join(page._published([base, ablation, other_model, hour, two_hours,
                                       decoding], self.data))
    for name in ("base", "sar", "hour", "two_hours"):
      self.assertIn(f"| `{name}` |", text)
    for name in ("ablation", "hour_avg3"):
      self.assertNotIn(f"| `{name}` |", text)


def same_value(stored, flag_value: str) -> bool:
  """Whether a config value as JSON stored it equals a flag's value as the command gave it."""
  if isinstance(stored, bool) or not isinstance(stored, (int, float)):
    return str(stored) == flag_value
  try:
    return float(flag_value) == stored
  except ValueError:
    return False


class RunRowsTest(tf.test.TestCase):
  """run_rows.sh reproduces the rows recorded from it: the same baseline and note, every flag
  of the recorded command, and no flag that sets a recorded config field otherwise."""

  # Flags of where a run and its parent are and of its precision (each record names its own;
  # PRECISION=recipe leaves the flag out), and the recipe's own values, which older records
  # spelled out.
  IGNORED = ("--run_dir=", "--config=", "--config.train.precision=", "--init_from=")
  RECIPE = {"--config.model.tie_embeddings=target", "--config.model.scale_embeddings=True"}

  def run_rows(self, precision):
    """run_rows.sh with PRECISION=precision, each command printed instead of run."""
    printer = os.path.join(self.get_temp_dir(), "argv.py")  # stands in for the interpreter
    with open(printer, "w", encoding="utf-8") as f:
      f.write(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    os.chmod(printer, 0o755)
    env = dict(os.environ, PRECISION=precision, PYTHON=printer)
    env.pop("ROWS", None)
    return subprocess.run(["bash", os.path.join(HERE, "run_rows.sh")], capture_output=True,
                          text=True, env=env, check=False)

  def rows(self, precision="recipe"):
    """{name: (options before --, flags after --)} of the rows run_rows.sh makes."""
    done = self.run_rows(precision)
    self.assertEqual(done.returncode, 0, done.stderr)
    rows = {}
    for line in done.stdout.splitlines():
      argv = json.loads(line)
      if argv[1:2] == ["row"]:
        split = argv.index("--")
        options = dict(a.split("=", 1) for a in argv[3:split] if "=" in a)
        rows[argv[2]] = (options, argv[split + 1:])
    return rows

  def test_recorded_rows_match_the_script(self):
    rows = self.rows()
    self.assertIn("cgru_tied_scaled_plateau_en-de_12000steps", rows)
    checked = 0
    for name, (options, flags) in rows.items():
      path = os.path.join(HERE, "rows", name, "row.json")
      if not os.path.exists(path):
        continue
      with open(path, encoding="utf-8") as f:
        record = json.load(f)
      checked += 1
      self.assertEqual(options.get("--baseline"), record.get("baseline"), name)
      self.assertEqual(options.get("--note"), record.get("note"), name)
      recorded = set(shlex.split(record["command"])[2:]) - self.RECIPE
      recorded = {a for a in recorded if not a.startswith(self.IGNORED)}
      self.assertEmpty(recorded - set(flags), name)
      for flag in flags:
        if not flag.startswith("--config."):  # --init_from, --update_vocab: checked above
          continue
        section, field = flag[len("--config."):].split("=", 1)[0].split(".")
        value = flag.split("=", 1)[1]
        stored = record["config"][section].get(field)
        if stored is not None:  # fields newer than the record are pinned to their old value
          self.assertTrue(same_value(stored, value), f"{name}: {flag}, recorded {stored!r}")
    self.assertGreater(checked, 15)

  @pytest.mark.slow  # prints every row three times, a process per row
  def test_rows_train_in_their_recorded_baselines_products(self):
    """Each row against a recorded baseline trains with the matrix products of its record: by
    name (the default and PRECISION=float32_bf16_matmul, for any CPU) or through the recipe's
    auto (PRECISION=recipe, which study.py checks). The float32 row compares precisions."""
    for precision in ("float32", "float32_bf16_matmul", "recipe"):
      checked = 0
      for name, (options, flags) in self.rows(precision).items():
        path = os.path.join(HERE, "rows", options.get("--baseline", "-"), "row.json")
        if name == "cgru_float32_de-en_2500steps" or not os.path.exists(path):
          continue
        trained = records.trained_precision(records.read_json(path))
        named = [flag.split("=", 1)[1] for flag in flags
                 if flag.startswith("--config.train.precision=")]
        allowed = ([], [trained]) if precision == "recipe" else ([trained],)
        self.assertIn(named[-1:], allowed, f"PRECISION={precision}: {name}")
        checked += 1
      self.assertGreater(checked, 15, precision)

  def test_an_unknown_precision_is_refused_in_one_line(self):
    done = self.run_rows("bfloat16")
    self.assertEqual(done.returncode, 2)
    self.assertEqual(done.stdout, "")
    self.assertEqual(done.stderr.strip(),
                     "error: PRECISION=bfloat16: use float32, recipe or float32_bf16_matmul.")


if __name__ == "__main__":
  tf.test.main()
