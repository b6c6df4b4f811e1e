"""The content check of what a model is loaded with (nmt_tf/manifest.py): the manifest a run
and a LiteRT export are saved with, verified by every loader: RunDir.load_model (and so the
Python API, translate, evaluate, score, caption, export, average) and the LiteRT client,
which runs it without TensorFlow."""

import contextlib
import glob
import io
import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf import manifest
from nmt_tf.cli import export as export_cli
from nmt_tf.cli import translate as translate_cli
from nmt_tf.experiment import checkpoint_files, RunDir
from nmt_tf.manifest import ManifestError
from nmt_tf.write_path import write_text
from tests.run_fixtures import make_tiny_run
from tests.test_cli_decode import run_command
from tests.training_fixtures import tiny_train_config
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shuffle_lines(path, keep=4, seed=1):
  """Shuffles the lines of a word list after its `keep` reserved tokens: the same entries,
  other ids."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  rest = lines[keep:]
  random.Random(seed).shuffle(rest)
  write_text(path, "\n".join(lines[:keep] + rest) + "\n")


class ManifestTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()
    os.makedirs(os.path.join(self.root, "vocab"))
    write_text(os.path.join(self.root, "vocab", "a.txt"), "a\n")
    write_text(os.path.join(self.root, "model.bin"), "weights")
    record = manifest.record(self.root, ["model.bin"] + manifest.files_below(self.root, "vocab"),
                             {"source_vocab_size": 5})
    write_text(os.path.join(self.root, manifest.FILE), json.dumps(record))

  def test_a_file_changed_or_missing_is_named(self):
    self.assertEqual(manifest.verify(self.root, "fix it")["sizes"], {"source_vocab_size": 5})
    write_text(os.path.join(self.root, "vocab", "a.txt"), "b\n")
    with self.assertRaisesRegex(ManifestError, f"^{self.root}/vocab/a.txt differs from the file "
                                "the model was saved with .*: it was changed or replaced; fix "
                                "it.$"):
      manifest.verify(self.root, "fix it")
    manifest.verify(self.root, "fix it", only=("model",))  # the other files only
    os.remove(os.path.join(self.root, "model.bin"))
    with self.assertRaisesRegex(ManifestError, "model.bin is missing"):
      manifest.verify(self.root, "fix it", only=("model",))

  def test_sizes_a_damaged_manifest_and_a_folder_without_one(self):
    record = manifest.read(self.root)
    manifest.check_sizes(self.root, record, {"source_vocab_size": 5}, "fix")
    with self.assertRaisesRegex(ManifestError, "source_vocab_size is 6, but the model was saved "
                                "with 5"):
      manifest.check_sizes(self.root, record, {"source_vocab_size": 6}, "fix")
    write_text(os.path.join(self.root, manifest.FILE), "{garbage")
    with self.assertRaisesRegex(ManifestError, "manifest.json is damaged"):
      manifest.verify(self.root, "fix")
    os.remove(os.path.join(self.root, manifest.FILE))
    self.assertIsNone(manifest.verify(self.root, "fix"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      manifest.note_once(self.root)
      manifest.note_once(self.root)
    self.assertEqual(err.getvalue(), f"note: {self.root} has no manifest.json (saved by an "
                     "older version): its files are checked by their sizes only.\n")

  def test_the_module_needs_the_standard_library_only(self):
    with open(manifest.__file__, encoding="utf-8") as f:
      source = f.read()
    imports = {line.split()[1] for line in source.splitlines()
               if line.startswith(("import ", "from "))}
    self.assertEqual(imports, {"hashlib", "json", "os", "sys"})


class RunManifestTest(tf.test.TestCase):
  """A run's manifest: vocab/, the model sections of config.json and the checkpoints."""

  def setUp(self):
    super().setUp()
    self.rundir, self.config, _ = make_tiny_run(os.path.join(tempfile.mkdtemp(), "run"))

  def test_a_run_recorded_before_a_model_field_was_added_still_loads(self):
    """A field added to the model section later is out of the digest at its default (a run's
    config.json written before it lacks it); a run that sets it records it."""
    from nmt_tf.experiment import run_manifest  # pylint: disable=import-outside-toplevel
    with open(self.rundir.config_path, encoding="utf-8") as f:
      values = json.load(f)
    for (section, field), default in run_manifest.LATER_FIELDS.items():
      self.assertEqual(values[section].pop(field), default)
    write_text(self.rundir.config_path, json.dumps(values))
    self.rundir.load_model()  # the manifest's digest is unchanged
    changed = self.config.replace(model=self.config.model.replace(
        attention_mode="hard", hard_expectation_rate=0.5, hard_expectation_draw="batch"))
    hard = self.config.replace(model=self.config.model.replace(
        attention_mode="hard", hard_expectation_rate=0.5))
    self.assertNotEqual(run_manifest.config_digest(changed), run_manifest.config_digest(hard))

  def test_a_field_added_to_a_fixed_section_is_a_later_field(self):
    """The fields of the checksummed sections when runs of this format were first recorded:
    a field added since must be in LATER_FIELDS, or every earlier run would fail its check."""
    from nmt_tf.experiment import run_manifest  # pylint: disable=import-outside-toplevel
    recorded = {
        "model": {"attention", "attention_mode", "attention_units", "conv_kernel_size",
                  "decoder", "decoder_transition_depth", "decoder_units", "dropout",
                  "embedding_dim", "embedding_dropout", "embedding_init_std", "encoder",
                  "encoder_layers", "encoder_units", "gru_reset", "hard_expectation_rate",
                  "hard_inference", "hidden_dropout", "image_backbone",
                  "image_backbone_weights", "image_coordinates", "image_size", "layer_norm",
                  "lexical_model", "output_units", "reverse_source", "rnn_cell",
                  "scale_embeddings", "source_word_dropout", "src_vocab_size", "summary",
                  "summary_units", "target_word_dropout", "tgt_vocab_size", "tie_embeddings"},
        "data": {"data_dir", "max_length", "name", "seed", "source_lang", "target_lang",
                 "test_prefix", "test_size", "test_src", "test_tgt", "tfds_data_dir",
                 "train_prefix", "train_size", "train_src", "train_tgt", "use_tfds",
                 "valid_prefix", "valid_size", "valid_src", "valid_tgt"},
        "tokenizer": {"character_coverage", "kind", "max_sentences", "min_count",
                      "model_type", "sample_seed", "shared", "split_punctuation",
                      "vocab_size"},
    }
    for section, fields in recorded.items():
      now = {f.name for f in dataclasses.fields(getattr(self.config, section))}
      later = {field for (where, field) in run_manifest.LATER_FIELDS if where == section}
      self.assertEqual(now - later, fields, section)

  def test_a_reshuffled_vocabulary_is_refused_by_every_loader(self):
    path = os.path.join(self.rundir.vocab_dir, "source.vocab")
    shuffle_lines(path)
    message = f"{path} differs from the file the model was saved with"
    with self.assertRaisesRegex(ManifestError, message):
      self.rundir.load_model()
    with self.assertRaisesRegex(ValueError, message):
      nmt_tf.load(self.rundir.path)
    code, out, err = run_command(translate_cli, run_dir=self.rundir.path, stdin="the boy\n")
    self.assertEqual((code, out), (2, ""))
    self.assertRegex(err, f"^error: {message}.*restore {self.rundir.path} from a backup of the "
                     "run")
    code, _, err = run_command(export_cli, run_dir=self.rundir.path)
    self.assertEqual(code, 2)
    self.assertRegex(err, f"^error: {message}")
    self.assertFalse(os.path.exists(self.rundir.export_dir))
    with self.assertRaisesRegex(ManifestError, message):  # nor does training resume with it
      self.rundir.prepare(RunDir(self.rundir.path).load_config())

  def test_the_model_sections_are_fixed_the_decode_settings_are_not(self):
    with open(self.rundir.config_path, encoding="utf-8") as f:
      values = json.load(f)
    values["decode"]["beam_size"] = 7
    write_text(self.rundir.config_path, json.dumps(values))
    self.assertEqual(self.rundir.load_model()[1].decode.beam_size, 7)
    values["model"]["dropout"] = 0.5
    write_text(self.rundir.config_path, json.dumps(values))
    with self.assertRaisesRegex(ManifestError, "config.json: its model, data or tokenizer "
                                "section differs from the one the run was trained with"):
      self.rundir.load_model()

  def test_a_checkpoint_swapped_for_another_is_refused(self):
    other, _, _ = make_tiny_run(os.path.join(tempfile.mkdtemp(), "other"), seed=5)
    best = checkpoint_files.best_checkpoint(self.rundir.best_dir)
    from nmt_tf.experiment import run_manifest  # pylint: disable=import-outside-toplevel
    run_manifest.add_checkpoint(self.rundir, best)
    self.rundir.load_model()
    theirs = checkpoint_files.best_checkpoint(other.best_dir)
    for name in glob.glob(theirs + ".*"):
      shutil.copy(name, best + name[len(theirs):])
    with self.assertRaisesRegex(ManifestError, f"{best}.index differs from the checkpoint the "
                                "run saved there .*: it was replaced by another checkpoint"):
      self.rundir.load_model()
    self.rundir.load_model("last")  # the others are still what they were

  def test_a_deleted_best_is_refused_naming_the_last_checkpoint(self):
    from nmt_tf.experiment import run_manifest  # pylint: disable=import-outside-toplevel
    from nmt_tf.experiment.run_dir import RunDirError  # pylint: disable=import-outside-toplevel
    best = checkpoint_files.best_checkpoint(self.rundir.best_dir)
    run_manifest.add_checkpoint(self.rundir, best)  # as validation records it
    shutil.rmtree(self.rundir.best_dir)
    with self.assertRaisesRegex(RunDirError, "best holds no checkpoint, but the run saved "
                                "best/ckpt-[0-9]+ there .*pass --checkpoint=last"):
      self.rundir.load_model()
    self.rundir.load_model("last")  # what the line names still loads

  def test_a_run_made_before_manifests_loads_as_before_and_says_so_once(self):
    os.remove(os.path.join(self.rundir.path, manifest.FILE))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      self.rundir.load_model()
      self.rundir.load_model("last")
    self.assertEqual(err.getvalue().count("has no manifest.json"), 1, err.getvalue())
    self.rundir.prepare(self.rundir.load_config())  # training records one
    self.assertIsNotNone(manifest.read(self.rundir.path))


@pytest.mark.slow  # trains
class TrainingRecordsTheManifestTest(tf.test.TestCase):

  def test_every_saved_checkpoint_is_recorded_and_the_deleted_ones_dropped(self):
    run_dir = os.path.join(tempfile.mkdtemp(), "run")
    config = tiny_train_config(steps=6, eval_every=2, checkpoint_every=2, keep_checkpoints=2,
                               alignment_images=0)
    nmt_tf.train(config, run_dir, stream=io.StringIO())
    record = manifest.read(run_dir)
    on_disk = [os.path.relpath(p, run_dir) for p in
               checkpoint_files.candidates(os.path.join(run_dir, "checkpoints"))]
    best = os.path.relpath(checkpoint_files.best_checkpoint(os.path.join(run_dir, "best")),
                           run_dir)
    self.assertCountEqual(record["checkpoints"], on_disk + [best])
    self.assertLen(on_disk, 2)
    for name, digest in record["checkpoints"].items():
      self.assertEqual(manifest.sha256(os.path.join(run_dir, name) + ".index"), digest)
    self.assertIn("vocab/tokenizers.json", record["files"])


class LiteRTClientFilesTest(tf.test.TestCase):
  """The client's own reading of an export made before manifests: one ClientError each."""

  def test_word_lists_and_metadata_entries(self):
    from nmt_tf.export import litert_client  # pylint: disable=import-outside-toplevel
    path = os.path.join(self.get_temp_dir(), "source.vocab")
    for text, message in (("", "holds 0 words, not even the 4 reserved tokens"),
                          ("<pad>\n<unk>\n", "holds 2 words")):
      write_text(path, text)
      with self.assertRaisesRegex(litert_client.ClientError, message):
        litert_client._Words(path, True)  # pylint: disable=protected-access
    with self.assertRaisesRegex(litert_client.ClientError, "lacks a valid 'vocab_dir' entry "
                                "\\(received 3\\)"):
      litert_client._entry({"vocab_dir": 3}, "vocab_dir", str, "x.json")  # pylint: disable=protected-access
    with self.assertRaisesRegex(litert_client.ClientError, "num_threads=-5"):
      litert_client.LiteRTTranslator(self.get_temp_dir(), num_threads=-5)


def run_client(model_dir, *args, stdin="the boy helps the king\n"):
  """The export's own client, `python nmt_litert.py MODEL_DIR ARGS`: (exit code, stdout,
  stderr, whether it imported TensorFlow)."""
  program = ("import runpy, sys\n"
             "sys.argv = sys.argv[1:]\n"
             "try:\n"
             "  runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "finally:\n"
             "  print('tensorflow' in sys.modules, file=sys.stderr)\n")
  out = subprocess.run([sys.executable, "-c", program, os.path.join(model_dir, "nmt_litert.py"),
                        model_dir, *args], input=stdin, capture_output=True, text=True,
                       timeout=SAFETY_NET, check=False)
  lines = out.stderr.strip().splitlines()
  return out.returncode, out.stdout, "\n".join(lines[:-1]), lines[-1] == "True"


@pytest.mark.slow  # exports and runs processes
class LiteRTExportManifestTest(tf.test.TestCase):
  """The client of a LiteRT export checks its files before it loads them."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.rundir, _, _ = make_tiny_run(os.path.join(cls.tmp, "run"), tokenizer="sentencepiece")
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the command keeps the console quiet itself
    cls.export = subprocess.run(
        [sys.executable, "-m", "nmt_tf", "export", "--format=litert", "--export_quantization=int8",
         f"--run_dir={cls.rundir.path}"], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=SAFETY_NET, check=False)
    cls.model_dir = cls.export.stdout.strip()

  def copy(self):
    target = os.path.join(tempfile.mkdtemp(), "1")
    shutil.copytree(self.model_dir, target)
    return target

  def error(self, model_dir, *args):
    code, out, err, imported_tf = run_client(model_dir, *args)
    self.assertEqual((code, out), (2, ""), err)
    self.assertFalse(imported_tf)
    lines = err.splitlines()
    self.assertStartsWith(lines[-1], "error: ")
    self.assertNotIn("Traceback", err)
    return lines[-1]

  def test_the_export_says_nothing_but_its_path(self):
    self.assertEqual(self.export.returncode, 0, self.export.stderr[-2000:])
    self.assertEqual(self.export.stderr, "")
    self.assertEqual(self.model_dir, os.path.join(self.rundir.export_dir, "nmt_litert", "1"))
    record = manifest.read(self.model_dir)
    self.assertCountEqual(record["files"], ["model.tflite", "nmt_litert.json",
                                            *manifest.files_below(self.model_dir, "vocab")])
    code, out, _, imported_tf = run_client(self.model_dir)
    self.assertEqual(code, 0)
    self.assertLen(out.splitlines(), 1)
    self.assertFalse(imported_tf)

  def test_changed_files_are_named(self):
    for name, change in (("vocab/source.model", lambda b: b[:len(b) // 2]),
                         ("model.tflite", lambda b: b[:1000]),
                         ("nmt_litert.json", lambda b: b.replace(b'"vocab_dir"', b'"vocabs"'))):
      model_dir = self.copy()
      path = os.path.join(model_dir, name)
      with open(path, "rb") as f:
        data = f.read()
      with open(path, "wb") as f:
        f.write(change(data))
      self.assertEqual(self.error(model_dir),
                       f"error: {path} differs from the file the model was saved with (its "
                       f"checksum in {model_dir}/manifest.json): it was changed or replaced; "
                       "export the model again with `nmt-tf export --format=litert`.")

  def test_an_export_without_manifest_is_checked_by_its_sizes_and_files(self):
    def without_manifest():
      model_dir = self.copy()
      os.remove(os.path.join(model_dir, manifest.FILE))
      return model_dir

    model_dir = without_manifest()  # a larger vocabulary than the model's
    sp = os.path.join(self.rundir.vocab_dir, "target.model")
    shutil.copy(sp, os.path.join(model_dir, "vocab", "source.model"))
    line = self.error(model_dir)
    self.assertRegex(line, "source_vocab_size is \\d+, but the model was saved with \\d+ "
                     f"\\({model_dir}/nmt_litert.json\\)")
    model_dir = without_manifest()
    with open(os.path.join(model_dir, "model.tflite"), "r+b") as f:
      f.truncate(1000)
    self.assertRegex(self.error(model_dir), "model.tflite is not a LiteRT model that can be "
                     "loaded")
    model_dir = without_manifest()
    with open(os.path.join(model_dir, "vocab", "source.model"), "r+b") as f:
      f.truncate(100)
    self.assertRegex(self.error(model_dir), "source.model is not a SentencePiece model")
    model_dir = without_manifest()
    meta = os.path.join(model_dir, "nmt_litert.json")
    with open(meta, encoding="utf-8") as f:
      values = json.load(f)
    del values["vocab_dir"]
    write_text(meta, json.dumps(values))
    self.assertEqual(self.error(model_dir), f"error: {meta} lacks a valid 'vocab_dir' entry "
                     "(received None); export the model again with `nmt-tf export "
                     "--format=litert`.")

  def test_bad_arguments(self):
    self.assertEqual(self.error(self.model_dir, "--batch_size=0"),
                     "error: Received --batch_size=0; expected a positive integer.")
    self.assertEqual(self.error(self.model_dir, "--threads=-5"),
                     "error: Received --threads=-5; expected a positive integer.")


if __name__ == "__main__":
  tf.test.main()
