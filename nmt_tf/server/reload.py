"""New versions while serving, as TF Serving's file-system polling
(`--file_system_poll_wait_seconds`): every poll, each model served from a base path
(Servable.entry) is compared with the version folders there.

A version its policy now picks is loaded and warmed up beside the versions serving, and only
then served (so it takes over unversioned requests already warm); a version the policy no
longer picks (its folder removed, or a newer one arrived under `latest`) leaves the model's
versions, and the requests that already hold its signatures finish on it (Signature.owner
keeps it loaded until they do). A version that fails to load is reported in one line and in
its status, and is tried again only when its folder changes; the versions serving stay.
"""

import os

from nmt_tf.server import model_config
from nmt_tf.server.servable import load_version, ServeError, warm_up


class Watcher:
  """Keeps the versions of `servables` (those with an `entry`) in step with their base paths:
  `scan()` (in a worker thread: it loads) then `apply(changes)` (in the event loop that
  serves)."""

  def __init__(self, servables, report):
    self.servables = [s for s in servables if s.entry is not None]
    self.report = report  # report(line): one line per loaded, removed or failed version
    self._tried = {}  # (model, version) -> stamp of the folder that failed to load

  def scan(self):
    """[(servable, {version: signatures} to add, [version] to remove, {version: error})]."""
    changes = []
    for servable in self.servables:
      found = model_config.version_folders(servable.entry.base_path)
      wanted = servable.entry.wanted(found)
      added, failed = {}, {}
      for version in wanted:
        if version in servable.versions:
          continue
        stamp = _stamp(found[version])
        if self._tried.get((servable.name, version)) == stamp:
          continue  # failed before, unchanged since
        try:
          signatures = load_version(found[version])
          warm_up(servable, {version: signatures})
        except (ServeError, ValueError, OSError) as error:
          self._tried[(servable.name, version)] = stamp
          failed[version] = str(error).splitlines()[0] if str(error) else type(error).__name__
          continue
        added[version] = signatures
      removed = sorted(v for v in servable.versions if v not in wanted)
      if not added and len(removed) == len(servable.versions):
        removed = removed[:-1]  # a model keeps its newest version until another serves
      if added or removed or failed:
        changes.append((servable, added, removed, failed, found))
    return changes

  def apply(self, changes):
    """Serves the versions `scan` loaded and stops serving those it removed."""
    for servable, added, removed, failed, found in changes:
      for version, signatures in sorted(added.items()):
        servable.versions[version] = signatures
        servable.failed.pop(version, None)
        self.report(f"model {servable.name}: version {version} serving")
      for version in removed:
        servable.versions.pop(version, None)
        self.report(f"model {servable.name}: version {version} no longer served")
      for version, error in failed.items():
        servable.failed[version] = error
        self.report(f"model {servable.name} version {version} not served: {error}")
      if added:
        servable.describe(found[servable.latest])
      for label, version in list(servable.labels.items()):
        if version not in servable.versions and version in removed:
          self.report(f"model {servable.name}: label {label!r} names version {version}, "
                      "no longer served")


def _stamp(folder):
  """What changes when a version folder is written again (its SavedModel file's mtime and
  size)."""
  try:
    info = os.stat(os.path.join(folder, "saved_model.pb"))
  except OSError:
    return None
  return info.st_mtime_ns, info.st_size
