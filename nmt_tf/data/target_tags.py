"""Several language pairs in one model, and the target-language tags that pick the output
language (Johnson et al. 2017, "Google's Multilingual Neural Machine Translation System").

`data.pairs="de-en,de-fr"` trains one model on the pairs of a corpus source (Multi30k, or
files `<prefix>.<lang>` in data_dir), one after the other in each split. With
`data.target_tags=True` every source starts with the tag of its target language,

  "<2fr> Ein Mann fährt Fahrrad."

a token of the source vocabulary of its own (a SentencePiece user-defined symbol), and every
decoding command takes the language (`--target_lang=fr`, the Python API's `target_lang=`,
the SavedModel signatures' `target_lang` input), tagging the source as training did. Several
target languages need the tags: without them the model could not tell which to produce.
"""

from typing import List, Sequence, Tuple

import tensorflow as tf


class TargetLanguageError(ValueError):
  """A target language the model was not trained for, or none for a tagged model (one line
  naming the languages it has)."""


def parse_pairs(pairs: str) -> List[Tuple[str, str]]:
  """"de-en,de-fr" -> [("de", "en"), ("de", "fr")]; ValueError for a malformed list."""
  parsed = []
  for pair in pairs.split(","):
    langs = tuple(part.strip() for part in pair.split("-"))
    if len(langs) != 2 or not all(langs) or langs[0] == langs[1]:
      raise ValueError(f"Received data.pairs={pairs!r}; expected language pairs "
                       "'<src>-<tgt>' separated by commas, e.g. 'de-en,de-fr'.")
    parsed.append(langs)
  if len(set(parsed)) != len(parsed):
    raise ValueError(f"Received data.pairs={pairs!r} with a pair twice; give each once.")
  return parsed


_OPEN, _CLOSE = "<2", ">"  # around the language: "<2fr>"


def tag(language: str) -> str:
  """The tag of a target language: "fr" -> "<2fr>"."""
  return f"{_OPEN}{language}{_CLOSE}"


def tagged(text: str, language: str) -> str:
  """A source sentence as a tagged model reads it: "<2fr> " + text."""
  return f"{tag(language)} {text}"


def target_languages(data_config) -> Tuple[str, ...]:
  """The target languages a model trained on `data_config` (a CorpusConfig) takes a tag
  for, in the order of data.pairs; () for a model without tags."""
  if not getattr(data_config, "target_tags", False):
    return ()
  if data_config.pairs:
    return tuple(dict.fromkeys(target for _, target in parse_pairs(data_config.pairs)))
  return (data_config.target_lang,) if data_config.target_lang else ()


def check_language(language, languages: Sequence[str]) -> None:
  """TargetLanguageError unless `language` is one of a tagged model's `languages`, or None
  for a model without tags."""
  if not languages:
    if language is not None:
      raise TargetLanguageError(f"target language {language!r} given, but the model was "
                                "trained without target-language tags (data.target_tags); "
                                "leave it out.")
    return
  if language not in languages:
    said = "no target language given" if language is None else (
        f"target language {language!r} is not one the model was trained for")
    raise TargetLanguageError(f"{said}; give one of {', '.join(languages)} "
                              "(--target_lang, or target_lang in a request).")


def tag_in_graph(text: tf.Tensor, target_lang: tf.Tensor,
                 languages: Sequence[str]) -> tf.Tensor:
  """text tf.string [batch], target_lang tf.string [batch] -> "<2xx> " + text [batch];
  an InvalidArgumentError naming the languages when one is not among `languages`."""
  known = tf.reduce_any(tf.equal(target_lang[:, None], tf.constant(list(languages))[None]),
                        axis=1)  # [batch]
  check = tf.debugging.Assert(tf.reduce_all(known), [
      f"target_lang: a language the model was not trained for; give one of "
      f"{', '.join(languages)} for every text. Received:", target_lang], summarize=8)
  with tf.control_dependencies([check]):
    return tf.strings.join([_OPEN, target_lang, _CLOSE + " ", text])  # as `tagged`
