"""Line-aligned parallel text files, plain or gzipped.

One sentence per line, line ``i`` of the source file translates line ``i`` of the target
file (the layout of Multi30k, WMT and the files written by ``generated.write_corpus``).
Bad files raise ``DataError`` naming the file, the line and the fix; pairs with an empty side
are skipped and counted in the log. Lines end with ``\\n`` or ``\\r\\n``; a carriage return
inside a line (old Mac ``\\r``-only line endings, which would read the whole file as one
line, or a stray ``\\r``, a line break to most other tools) is an error.
"""

import dataclasses
import gzip
import os
from typing import List, Optional, Tuple

from absl import logging

from nmt_tf.data.errors import DataError

_GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 1 << 24


@dataclasses.dataclass
class ParallelText:
  """Aligned raw sentence pairs of one split.

  Attributes:
    sources: source sentences, one python str per pair.
    targets: target sentences, same length as ``sources``.
    name: where the pairs came from (file names or dataset), for messages.
    paths: the files read (source, target), empty for pairs made in memory.
  """
  sources: List[str]
  targets: List[str]
  name: str = ""
  paths: Tuple[str, ...] = ()

  def __post_init__(self):
    if len(self.sources) != len(self.targets):
      raise DataError(
          f"ParallelText {self.name!r}: received {len(self.sources)} sources and "
          f"{len(self.targets)} targets; pass lists of equal length.")

  def __len__(self):
    return len(self.sources)


def decode_line(raw: bytes, name: str, line_number: int, strip: bool = True) -> str:
  """One line of a text file: UTF-8 bytes -> str without its terminator and surrounding
  whitespace.

  Args:
    raw: the line's bytes, ending with ``\\n``, ``\\r\\n`` or nothing (the last line).
    name: the file as error messages name it (a path, or "stdin").
    line_number: 1-based, for error messages.
    strip: False keeps the whitespace around the text (a target prefix's trailing space
      says that its last word is complete); only the terminator goes.

  Raises:
    DataError: the line has a carriage return before its end (``\\r``-only line endings) or
      is not valid UTF-8.
  """
  if b"\r" in raw:
    body = raw[:-1] if raw.endswith(b"\n") else raw
    body = body[:-1] if body.endswith(b"\r") else body
    column = body.find(b"\r")
    if column >= 0 and line_number == 1 and not raw.endswith(b"\n"):
      count = raw.count(b"\r")
      raise DataError(
          f"{name} line 1: old Mac line endings: the whole input is one line with {count} "
          f"carriage returns (\\r) and no \\n; convert them with `tr '\\r' '\\n' < IN > OUT` "
          f"or `dos2unix -c mac FILE`.")
    if column >= 0:
      raise DataError(
          f"{name} line {line_number}: carriage return (\\r) at column {column + 1} inside "
          f"the line (old Mac \\r line endings mixed with \\n, or a stray \\r); turn \\r "
          f"line endings into \\n with `tr '\\r' '\\n'` or `dos2unix -c mac`, or delete "
          f"stray ones with `tr -d '\\r'`.")
  try:
    text = raw.decode("utf-8")
    return text.strip() if strip else text.rstrip("\r\n")
  except UnicodeDecodeError as e:
    raise DataError(
        f"{name} line {line_number}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at "
        f"column {e.start + 1}); re-encode the {'input' if name == 'stdin' else 'file'} as "
        f"UTF-8, e.g. `iconv -f latin1 -t utf-8`.") from None


def is_gzip(path: str) -> bool:
  """Whether the file starts with the gzip magic bytes."""
  with open(path, "rb") as f:
    return f.read(2) == _GZIP_MAGIC


def read_lines(path: str, role: str = "corpus", strip: bool = True) -> List[str]:
  """Reads a UTF-8 text file (gzipped when it starts with the gzip magic bytes).

  Args:
    path: file path; ``.gz`` files and plain files are both accepted.
    role: what the file is for (e.g. "train source"), used in error messages.
    strip: False keeps the whitespace around each line's text (see `decode_line`).

  Returns:
    The lines without their line terminator (``\\n`` or ``\\r\\n``), surrounding
    whitespace stripped (unless `strip` is False).

  Raises:
    DataError: the file is missing, is a corrupt gzip file, has a line that is not UTF-8 or
      a carriage return inside a line (``decode_line``).
  """
  if not os.path.isfile(path):
    raise DataError(
        f"{role} file not found: {path!r}; check the path (or the corpus directory, "
        f"language pair and split prefix that built it).")
  opener = gzip.open if is_gzip(path) else open
  lines = []
  try:
    with opener(path, "rb") as f:
      for line_number, raw in enumerate(f, start=1):
        lines.append(decode_line(raw, path, line_number, strip))
  except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError.
    raise DataError(f"{path}: cannot read ({e}); re-create or re-download the "
                    f"file.") from None
  return lines


def scan_lines(path: str, role: str = "corpus") -> Tuple[int, bool]:
  """Checks a text file as ``read_lines`` would, without keeping its lines.

  Reads the file in blocks of 16 MiB (gzip decompressed on the fly), counting lines and
  checking UTF-8 and line endings block by block; a block with a problem is read again line
  by line from the start of the file to raise ``read_lines``'s exact error.

  Returns:
    ``(number of lines, whether the file is gzipped)``; a last line without ``\\n`` counts.

  Raises:
    DataError: as ``read_lines``.
  """
  if not os.path.isfile(path):
    read_lines(path, role)  # raises the missing-file error
  gzipped = is_gzip(path)
  opener = gzip.open if gzipped else open
  lines, tail, suspect = 0, b"", False
  try:
    with opener(path, "rb") as f:
      for block in iter(lambda: f.read(_BLOCK), b""):
        block = tail + block
        cut = block.rfind(b"\n") + 1
        body, tail = block[:cut], block[cut:]
        lines += body.count(b"\n")
        if body.count(b"\r") != body.count(b"\r\n") or not _is_utf8(body):
          suspect = True
          break
  except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError.
    raise DataError(f"{path}: cannot read ({e}); re-create or re-download the "
                    f"file.") from None
  if tail and not suspect:  # a last line without a line break
    lines += 1
    suspect = tail.count(b"\r") > 0 or not _is_utf8(tail)
  if suspect:
    return len(read_lines(path, role)), gzipped  # the exact check, line by line
  return lines, gzipped


def _is_utf8(raw: bytes) -> bool:
  try:
    raw.decode("utf-8")
    return True
  except UnicodeDecodeError:
    return False


def read_parallel(source_path: str, target_path: str,
                  name: Optional[str] = None) -> ParallelText:
  """Reads two line-aligned files into a ``ParallelText``, skipping empty pairs.

  Args:
    source_path: file with one source sentence per line.
    target_path: file with the aligned target sentences.
    name: label for log lines and messages; defaults to the source file name.

  Returns:
    The pairs whose two sides are both non-empty.

  Raises:
    DataError: a file is missing or undecodable, or the line counts differ.
  """
  sources = read_lines(source_path, "source")
  targets = read_lines(target_path, "target")
  if len(sources) != len(targets):
    raise DataError(
        f"Line counts differ: source {source_path} has {len(sources)} lines, target "
        f"{target_path} has {len(targets)} lines; the files must be line-aligned (one "
        f"sentence pair per line), fix or re-extract them.")
  kept_src, kept_tgt = [], []
  for s, t in zip(sources, targets):
    if s and t:
      kept_src.append(s)
      kept_tgt.append(t)
  skipped = len(sources) - len(kept_src)
  name = name or os.path.basename(source_path)
  if skipped:
    logging.info("%s: skipped %d of %d pairs with an empty side.", name, skipped,
                 len(sources))
  if not kept_src:
    raise DataError(
        f"Empty corpus: {source_path} and {target_path} have no pair with two non-empty "
        f"sides ({len(sources)} lines); check that these are the right files.")
  return ParallelText(kept_src, kept_tgt, name=name, paths=(source_path, target_path))


def split_files(directory: str, prefix: str, source_lang: str,
                target_lang: str) -> Tuple[str, str]:
  """Returns ``(<dir>/<prefix>.<src>[.gz], <dir>/<prefix>.<tgt>[.gz])``.

  The plain file wins when both a plain and a gzipped file exist; when neither exists the
  plain name is returned so that ``read_lines`` reports it as missing.
  """
  paths = []
  for lang in (source_lang, target_lang):
    plain = os.path.join(directory, f"{prefix}.{lang}")
    gz = plain + ".gz"
    paths.append(gz if not os.path.exists(plain) and os.path.exists(gz) else plain)
  return paths[0], paths[1]
