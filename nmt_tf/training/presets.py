"""Model presets: the papers' architectures as ModelConfig values, by the names of the
configs/ files and of the benchmarks' --decoders.

  encdec (Cho et al. 2014), rnnsearch (Bahdanau et al. 2015), cgru (dl4mt/Nematus),
  luong (Luong et al. 2015, general attention, input feeding), sar_avg / sar_cavg (self-attentive
  residual decoder with the average / contextual-average summary, Werlen et al. 2018),
  memory_rnn and self_attentive_rnn (Werlen et al. 2018).

The experiments themselves are the recipes in configs/ (`<model>_<dataset>.py`), each of
which sets every field it uses.
"""

MODELS = {
    "encdec": dict(decoder="encdec"),
    "rnnsearch": dict(decoder="rnnsearch"),
    "cgru": dict(decoder="cgru"),
    "luong": dict(decoder="luong", attention="general"),
    "sar_avg": dict(decoder="self_attentive_residual", summary="avg"),
    "sar_cavg": dict(decoder="self_attentive_residual", summary="cavg"),
    "memory_rnn": dict(decoder="memory_rnn"),
    "self_attentive_rnn": dict(decoder="self_attentive_rnn"),
}
