"""Model presets: the papers' architectures by name, as the ModelConfig fields that make them.

A recipe (nmt_tf/configs/<dataset>.py) sets what is particular to its data; the part of
`--config=<dataset>:<model>` after the colon picks one of these models, which the recipe
applies with `base_config(model)`. The benchmarks' --decoders take the same names.
"""

from nmt_tf.models.config import ConfigError

# name: (ModelConfig fields, what it is)
MODELS = {
    "cgru": (dict(decoder="cgru"),
             "conditional GRU of dl4mt/Nematus with the deep output layer"),
    "rnnsearch": (dict(decoder="rnnsearch"),
                  "RNNsearch, Bahdanau et al. 2015: additive attention"),
    "encdec": (dict(decoder="encdec"),
               "RNN encoder-decoder with a fixed context vector, Cho et al. 2014"),
    "luong": (dict(decoder="luong", attention="general"),
              "Luong et al. 2015: general score, input feeding"),
    "sar_avg": (dict(decoder="self_attentive_residual", summary="avg"),
                "self-attentive residual decoder, average summary, Werlen et al. 2018"),
    "sar_cavg": (dict(decoder="self_attentive_residual", summary="cavg"),
                 "self-attentive residual decoder, contextual average, Werlen et al. 2018"),
    "memory_rnn": (dict(decoder="memory_rnn"), "memory RNN, Werlen et al. 2018"),
    "self_attentive_rnn": (dict(decoder="self_attentive_rnn"),
                           "self-attentive RNN, Werlen et al. 2018"),
}


def model_fields(name):
  """The ModelConfig fields of preset `name`; ConfigError naming the presets if unknown."""
  if name not in MODELS:
    raise ConfigError(f"Unknown model preset {name!r}; expected one of {', '.join(MODELS)} "
                      "(`nmt-tf recipes` lists them).")
  return dict(MODELS[name][0])
