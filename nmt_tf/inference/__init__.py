"""Text-to-text inference shared by evaluation, translation and export."""

from nmt_tf.inference.alignments import (hard_alignment, pharaoh, replace_unknowns,
                                         soft_alignment, source_tokens, target_tokens)
from nmt_tf.inference.batch_translate import (CompiledTranslator, Hypothesis, SentenceResult,
                                              translate_lines)
from nmt_tf.inference.ensemble import ModelEnsemble
from nmt_tf.inference.forced_scoring import ForcedScore, ForcedScorer
from nmt_tf.inference.loading import load_models
from nmt_tf.inference.shortlist import Shortlist
from nmt_tf.inference.translator import token_log_probs, Translator

__all__ = ["CompiledTranslator", "ForcedScore", "ForcedScorer", "Hypothesis", "ModelEnsemble",
           "SentenceResult", "Shortlist", "Translator", "hard_alignment", "load_models", "pharaoh",
           "replace_unknowns", "soft_alignment", "source_tokens", "target_tokens",
           "token_log_probs", "translate_lines"]
