"""Release tier: every recipe of nmt_tf/configs (configs/ in a checkout) runs as users run it.

Each recipe with its default model, and every model preset on the Multi30k SentencePiece
recipe (the recipe of the results page), trains 3 steps on a slice of its own data (MODEL_SIZES shrunk; the tokenizer,
decoder, attention, precision, strategy and decode settings exactly as shipped) through its
first validation (loss, greedy BLEU, the alignment images of greedy and beam search), then
`nmt-tf evaluate`, `nmt-tf translate` and `nmt-tf export` run on the run directory, and the
export is loaded in a process with only tensorflow and tensorflow_text, where each signature
is called. One test class per recipe and model, so that they spread over the test workers.
"""

import io
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf

import nmt_tf
from nmt_tf.cli import caption as caption_cli
from nmt_tf.cli import evaluate as evaluate_cli
from nmt_tf.cli import export as export_cli
from nmt_tf import configs
from nmt_tf.data import target_tags
from nmt_tf.cli import translate as translate_cli
from tests.release_fixtures import ExportLoader, shrunk_recipe, write_multi30k_slice
from tests.test_cli_decode import run_command
from tests.run_fixtures import tensorboard_events

SENTENCES = ["Ein Mann fährt Fahrrad .", "", "Zwei Hunde spielen im Schnee am Fluss ."]


_MULTI30K = {}


def multi30k_slice():
  """The Multi30k slice of this test process, written on first use."""
  if not _MULTI30K:
    _MULTI30K["dir"] = os.path.join(tempfile.mkdtemp(), "multi30k")
    _MULTI30K["data"] = write_multi30k_slice(_MULTI30K["dir"])
  return _MULTI30K["dir"]


class RecipeCase(tf.test.TestCase):
  """Runs one recipe (`check_recipe`); a class per recipe below, so that the recipes spread
  over the test workers (which receive whole classes)."""

  def check_recipe(self, name):
    config = shrunk_recipe(name, multi30k_slice())
    run_dir = os.path.join(tempfile.mkdtemp(), name.replace(":", "_"))
    stream = io.StringIO()
    summary = nmt_tf.train(config, run_dir, stream=stream)
    log = stream.getvalue()
    self.assertEqual(summary["steps"], 3, log)
    self.assertIn("validation at step 3:", log)
    self.assertTrue(np.isfinite(summary["last_validation"]["loss"]), log)
    self.assertEndsWith(summary["best_checkpoint"], "ckpt-3")
    tags = tensorboard_events(run_dir)
    images = config.train.alignment_images
    for i in range(images):
      self.assertIn(f"valid/alignment/{i}", tags)
      if config.decode.beam_size > 1:
        self.assertIn(f"valid/alignment_beam/{i}", tags)

    languages = target_tags.target_languages(config.data)  # a multilingual recipe's
    lang = {"target_lang": languages[-1]} if languages else {}
    code, out, err = run_command(evaluate_cli, run_dir=run_dir)
    self.assertEqual(code, 0, err)
    self.assertRegex(out, r"BLEU  = \d+\.\d\d")
    for name in ([f"test_{s}-{t}" for s, t in target_tags.parse_pairs(config.data.pairs)]
                 if languages else ["test"]):  # a report of each language pair
      self.assertTrue(os.path.exists(os.path.join(run_dir, "eval", name, "report.json")))
    if config.model.encoder == "image":
      self.check_captioning(config, run_dir, out)
      return

    source_file = os.path.join(run_dir, "input.txt")
    with open(source_file, "w", encoding="utf-8") as f:
      f.writelines(line + "\n" for line in SENTENCES)
    code, out, err = run_command(translate_cli, run_dir=run_dir, input_file=source_file,
                                 **lang)
    self.assertEqual(code, 0, err)
    translations = out.splitlines()
    self.assertLen(translations, len(SENTENCES))
    self.assertEqual(translations[1], "")  # an empty line gives an empty translation

    code, out, err = run_command(export_cli, run_dir=run_dir)
    self.assertEqual(code, 0, err)
    path = out.strip()
    self.assertEqual(path, os.path.join(run_dir, "export", "nmt", "1"))
    served = ExportLoader.request({"path": path, "text": SENTENCES, **lang})
    self.assertNotIn("error", served, served.get("error"))
    self.assertEqual(served["modules"], [])  # neither nmt_tf nor the tests were imported
    self.assertLen(served["greedy"], len(SENTENCES))
    self.assertEqual(served["greedy"][1], "")
    self.assertEqual([len(row) for row in served["beam"]],
                     [config.decode.beam_size] * len(SENTENCES))
    # The score of a translation's text (retokenized, so not always the search's tokens).
    self.assertLen(served["score"], len(SENTENCES))
    self.assertTrue(all(np.isfinite(x) and x <= 0 for x in served["score"]), served["score"])
    for signature, outputs in served["empty"].items():
      self.assertTrue(outputs, signature)
      self.assertEqual({shape[1] for shape in outputs.values()}, {0}, signature)


  def check_captioning(self, config, run_dir, evaluation):
    """caption and export of a captioning run; the export answers image bytes in a process
    with only tensorflow and tensorflow_text."""
    self.assertIn("nrefs:2", evaluation)  # both captions of each image are references
    folder = os.path.join(run_dir, "shapes", "images")
    images = [os.path.join(folder, f"test_0000{i}.png") for i in range(3)]
    code, out, err = run_command(caption_cli, run_dir=run_dir, input_file=folder,
                                 attention_dir=os.path.join(run_dir, "maps"))
    self.assertEqual(code, 0, err)
    lines = out.splitlines()
    sizes = config.data  # every image of the folder: train, valid and test
    self.assertLen(lines, sizes.train_size + sizes.valid_size + sizes.test_size)
    self.assertTrue(all(line.split("\t")[0].startswith(folder) for line in lines), lines[:3])
    self.assertTrue(os.path.exists(os.path.join(run_dir, "maps",
                                                "test_00000.png.attention.png")))
    code, out, err = run_command(export_cli, run_dir=run_dir)
    self.assertEqual(code, 0, err)
    path = out.strip()
    self.assertEqual(path, os.path.join(run_dir, "export", "nmt_caption", "1"))
    served = ExportLoader.request({"path": path, "images": images})
    self.assertNotIn("error", served, served.get("error"))
    self.assertEqual(served["modules"], [])
    code, out, err = run_command(caption_cli, run_dir=run_dir, input_file=images[0])
    self.assertEqual(served["beam"][0][0], out.split("\t")[1].strip())  # decode.beam_size
    code, out, err = run_command(caption_cli, run_dir=run_dir, input_file=images[0],
                                 beam_size=1)
    self.assertEqual(served["caption"][0], out.split("\t")[1].strip())
    cells = len(served["attention"][0][0])
    self.assertEqual(cells, (config.model.image_size // 2 ** config.model.encoder_layers) ** 2)
    for row, length in zip(served["attention"], served["caption_length"]):
      self.assertAllClose(np.sum(row[:length], axis=-1), np.ones(length), atol=1e-4)
    self.assertEqual([len(row) for row in served["beam"]], [config.decode.beam_size] * 3)
    for signature, outputs in served["empty"].items():
      self.assertEqual({shape[1] for shape in outputs.values()}, {0}, signature)


def recipes_to_run():
  """Every recipe with its default model, and every model preset on the Multi30k
  SentencePiece recipe: "multi30k:luong", ..."""
  from nmt_tf.experiment import presets  # pylint: disable=g-import-not-at-top
  return configs.names() + [f"multi30k:{model}" for model in presets.MODELS if model != "cgru"]


def _recipe_classes():
  """{class name: TestCase} with one test per recipe of recipes_to_run()."""
  classes = {}
  for name in recipes_to_run():
    def test(self, name=name):
      self.check_recipe(name)
    words = name.replace(":", "_").split("_")
    test.__name__ = "test_" + "_".join(words)
    test.__doc__ = f"Recipe {name}: trains, validates, evaluates, translates and exports."
    class_name = "Recipe" + "".join(part.capitalize() for part in words) + "Test"
    classes[class_name] = pytest.mark.slow(type(class_name, (RecipeCase,), {
        test.__name__: test, "__module__": __name__}))
  return classes


globals().update(_recipe_classes())


if __name__ == "__main__":
  tf.test.main()
