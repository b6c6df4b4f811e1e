"""The commands of `nmt-tf`: one module per command, nmt_tf/cli/COMMAND.py, with COMMAND and
run(argv). SUMMARIES gives each command's one line of help, so that `nmt-tf`, `nmt-tf help`
and an unknown command answer without importing the command modules, which import TensorFlow
(as pip's table of commands lets `pip help` answer without importing them).

Modules define their own absl flags at import; flags used by several commands live in
nmt_tf/cli/common.py.
"""

import importlib

SUMMARIES = {
    "average": "Average the weights of the last N checkpoints into a new checkpoint.",
    "caption": "Caption images with a captioning run (greedy or beam, attention heat maps).",
    "evaluate": "BLEU/chrF (sacrebleu), BLEU by length and without UNK, attention heat maps.",
    "export": ("Export a checkpoint as a TF Serving SavedModel (greedy, beam_search, score) or "
               "a LiteRT model (--format=litert)."),
    "main": "Quick start: train on --config, evaluate the best checkpoint on test, export it.",
    "recipes": "List the recipes (--config=RECIPE[:MODEL]) and the model presets.",
    "serve": ("Serve a run or an export over TF Serving's REST API, with a page that shows the "
              "attention."),
    "score": "Log-probability of given translations under the model (forced decoding).",
    "train": "Train a model on --config in --run_dir (rerun to resume after a stop).",
    "translate": "Translate a file or stdin (beam/n-best, alignments, UNK replacement, ensembles).",
}


def commands():
  """{command name: module} of every command, imported (which defines their flags)."""
  return {name: importlib.import_module(f"{__name__}.{name}") for name in SUMMARIES}
