"""The one exception type raised for bad input data."""


class DataError(ValueError):
  """Bad corpus, tokenizer or pipeline input.

  The message is one line that names what was received (file, line, counts, option) and
  how to fix it, e.g. ``"train.de line 17: not valid UTF-8 ...; re-encode the file as
  UTF-8"``. Subclasses ValueError so callers that catch bad arguments catch it too.
  """
