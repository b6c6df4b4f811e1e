"""The models a server serves, as TF Serving's `--model_config_file` names them (its
ModelServerConfig in protobuf text format), and which versions of a base path each serves.

  model_config_list {
    config {
      name: "de_en"  base_path: "/models/de_en"  model_platform: "tensorflow"
      model_version_policy { latest { num_versions: 2 } }   # or all {} or specific { versions: 3 }
      version_labels { key: "stable" value: 3 }
    }
  }

A base path holds one folder per version (1/, 2/, ...: `nmt-tf export` writes them); the
policy picks the versions served among those present, the newest one by default, as TF
Serving's default `latest { num_versions: 1 }`.
"""

import dataclasses
import os
from typing import Dict, Tuple

from google.protobuf import text_format

LATEST, ALL, SPECIFIC = "latest", "all", "specific"


class ModelConfigError(ValueError):
  """A model config file the server cannot follow; one line naming the fault."""


@dataclasses.dataclass
class ModelEntry:
  """One model: `name`, its `base_path` of version folders, the `policy` (LATEST, ALL or
  SPECIFIC) with its `versions` (LATEST: (num_versions,); SPECIFIC: the versions) and
  `labels` {label: version}."""

  name: str
  base_path: str
  policy: str = LATEST
  versions: Tuple[int, ...] = (1,)
  labels: Dict[str, int] = dataclasses.field(default_factory=dict)

  def wanted(self, present):
    """The versions of `present` (an iterable of ints) that the policy serves."""
    present = sorted(set(present))
    if self.policy == ALL:
      return present
    if self.policy == SPECIFIC:
      return [v for v in present if v in self.versions]
    return present[-self.versions[0]:] if present else []


def version_folders(base_path):
  """{version: folder} of the complete versions under `base_path` (N/saved_model.pb; the
  staging folders of an export in progress start with "." and are not versions)."""
  try:
    names = os.listdir(base_path)
  except OSError:
    return {}
  return {int(n): os.path.join(base_path, n) for n in names
          if n.isdigit() and os.path.isfile(os.path.join(base_path, n, "saved_model.pb"))}


def read(path):
  """[ModelEntry] of the model config file at `path`; ModelConfigError naming the fault."""
  # pylint: disable=g-import-not-at-top
  from tensorflow_serving.config import model_server_config_pb2
  try:
    with open(path, encoding="utf-8") as f:
      text = f.read()
  except (OSError, UnicodeDecodeError) as error:
    raise ModelConfigError(f"--model_config_file={path} cannot be read "
                           f"({getattr(error, 'strerror', None) or error}).") from None
  try:
    config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
  except text_format.ParseError as error:
    raise ModelConfigError(f"--model_config_file={path}: {error} (TF Serving's "
                           "ModelServerConfig in text format: docs/SERVE.md).") from None
  return entries(config, f"--model_config_file={path}")


def entries(config, where):
  """[ModelEntry] of `config` (a ModelServerConfig proto; `where` names it in errors)."""
  if config.WhichOneof("config") != "model_config_list" or \
      not config.model_config_list.config:
    raise ModelConfigError(f"{where} lists no model; write "
                           "model_config_list { config { name: ... base_path: ... } }.")
  found, names = [], set()
  for model in config.model_config_list.config:
    found.append(_entry(model, where, names))
    names.add(model.name)
  return found


def _entry(model, where, names):
  where = f"{where}: model {model.name!r}"
  if not model.name or "/" in model.name or ":" in model.name:
    raise ModelConfigError(f"{where} needs a name without '/' or ':'.")
  if model.name in names:
    raise ModelConfigError(f"{where} is listed twice; give each model one config.")
  if not model.base_path:
    raise ModelConfigError(f"{where} has no base_path (the folder of its versions).")
  if model.model_platform not in ("", "tensorflow"):
    raise ModelConfigError(f"{where} has model_platform {model.model_platform!r}; this server "
                           "serves \"tensorflow\" SavedModels.")
  policy = model.model_version_policy.WhichOneof("policy_choice") or LATEST
  if policy == LATEST:
    versions = (model.model_version_policy.latest.num_versions or 1,)
  elif policy == SPECIFIC:
    versions = tuple(model.model_version_policy.specific.versions)
    if not versions:
      raise ModelConfigError(f"{where}: specific {{ }} names no version.")
  else:
    versions = ()
  return ModelEntry(model.name, os.path.abspath(model.base_path), policy, versions,
                    dict(model.version_labels))
