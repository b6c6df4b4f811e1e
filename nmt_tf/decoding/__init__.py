"""nmt_tf.decoding: greedy and beam search over a model-agnostic step function.

The searches see only `step_fn(ids, state, context, time) -> (logits, attention, state)`
(see docs/DESIGN.md) and know no model class; `decode_model` takes that step, with the
context and the state, from a model's `encode`, `initial_state` and `step`.
"""

from nmt_tf.decoding.beam import beam_search
from nmt_tf.decoding.greedy import greedy_search
from nmt_tf.decoding.lexical import Constraints
from nmt_tf.decoding.penalties import coverage_penalty
from nmt_tf.decoding.penalties import hypothesis_scores
from nmt_tf.decoding.penalties import length_penalty
from nmt_tf.decoding.prefix import Prefix
from nmt_tf.decoding.result import DecodeResult
from nmt_tf.decoding.search import decode
from nmt_tf.decoding.search import decode_model

__all__ = [
    "Constraints",
    "DecodeResult",
    "Prefix",
    "beam_search",
    "coverage_penalty",
    "decode",
    "decode_model",
    "greedy_search",
    "hypothesis_scores",
    "length_penalty",
]
