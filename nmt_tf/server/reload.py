"""The models and versions served, changed while serving, as TF Serving changes them: new and
removed version folders found by polling the base paths (`--file_system_poll_wait_seconds`),
and a new model config sent by ModelService.HandleReloadConfigRequest.

A version its model's policy now picks is loaded and warmed up beside the versions serving, and
only then served (so it takes over unversioned requests already warm); a version the policy no
longer picks (its folder removed, or a newer one arrived under `latest`) leaves the model's
versions, and the requests that already hold its signatures finish on it (Signature.owner
keeps it loaded until they do). A version that fails to load is reported in one line and in
its status, and is tried again only when its folder changes; the versions serving stay.

Loading runs in one thread of its own, with the objects already served frozen out of the
garbage collector's walks while it loads: docs/SERVE.md says why, and docs/PERFORMANCE.md,
"The local server", measures a version swap under load.
"""

import asyncio
import concurrent.futures
import gc
import os

from nmt_tf.server import model_config
from nmt_tf.server.errors import first_line, RequestError
from nmt_tf.server.servable import check_labels, load_entry, load_version, ServeError, warm_up

LOAD_ERRORS = (ServeError, ValueError, OSError)


class Watcher:
  """Keeps the models of `service` (service.py) in step with their base paths (`poll()`) and
  with a new model config (`reload(entries)`); each loads in the loading thread and changes
  what is served between requests, in the event loop that serves."""

  def __init__(self, service, report):
    self.service = service
    self.report = report  # report(line): one line per loaded, removed or failed version
    self._tried = {}  # (model, version) -> stamp of the folder that failed to load
    self._pool = concurrent.futures.ThreadPoolExecutor(1, "nmt-tf-load")
    self._lock = None  # an asyncio.Lock of the serving loop: one change at a time

  async def _in_turn(self, load, apply):
    """apply(load()) with load() in the loading thread, after the changes before it."""
    if self._lock is None:
      self._lock = asyncio.Lock()
    async with self._lock:
      # The objects served so far leave the collector's view while loading: loading makes
      # many objects, and the full collection they trigger would otherwise walk the whole
      # heap holding the GIL (300 ms and more, every request waiting). After the change they
      # are collectable again (a removed version's cycles among them).
      gc.freeze()
      try:
        loaded = await asyncio.get_running_loop().run_in_executor(self._pool, load)
        return apply(loaded)
      finally:
        gc.unfreeze()

  async def poll(self):
    """Serves the versions that appeared under the base paths and drops those that went."""
    def load():
      changes = [self._scan(s, s.entry) for s in list(self.service.models.values())
                 if s.entry is not None]
      return [change for change in changes if change]
    await self._in_turn(load, self._apply)

  async def reload(self, entries):
    """Serves the models of `entries` ([model_config.ModelEntry], a whole new config) and
    only them, once each has loaded its versions; RequestError, and nothing changed, when one
    cannot be served (a model whose base path holds no version yet is served once it does)."""
    def load():
      models, kept, changes = {}, [], []  # kept: (servable, its new entry)
      for entry in entries:
        servable = self.service.models.get(entry.name)
        try:
          if servable is not None and servable.entry is not None and \
              servable.entry.base_path == entry.base_path:
            change = self._scan(servable, entry)
            _, added, removed, _, _ = change or (None, {}, [], None, None)
            check_labels(entry, (set(servable.versions) | set(added)) - set(removed))
            kept.append((servable, entry))
            changes += [change] if change else []
          else:
            servable = load_entry(entry, self.report)
            warm_up(servable)
        except LOAD_ERRORS as error:
          raise RequestError(first_line(error)) from None
        models[entry.name] = servable
      return models, kept, changes

    def apply(loaded):
      models, kept, changes = loaded
      for name in self.service.models:
        if name not in models:
          self.report(f"model {name} no longer served")
      for servable, entry in kept:
        servable.entry, servable.labels = entry, dict(entry.labels)
      self._apply(changes)
      for name, servable in models.items():
        if self.service.models.get(name) is not servable and servable.versions:
          self.report(f"model {name}: version {', '.join(map(str, sorted(servable.versions)))}"
                      " serving")
      self.service.set_models(list(models.values()))

    await self._in_turn(load, apply)

  def _scan(self, servable, entry):
    """(servable, {version: signatures} loaded, [version] to drop, {version: error}, found)
    that `entry`'s policy asks of `servable` under its base path, or None for no change."""
    found = model_config.version_folders(entry.base_path)
    wanted = entry.wanted(found)
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
      except LOAD_ERRORS as error:
        self._tried[(servable.name, version)] = stamp
        failed[version] = first_line(error)
        continue
      added[version] = signatures
    removed = sorted(v for v in servable.versions if v not in wanted)
    if not added and removed and len(removed) == len(servable.versions):
      removed = removed[:-1]  # a model keeps its newest version until another serves
    if added or removed or failed:
      return servable, added, removed, failed, found
    return None

  def _apply(self, changes):
    """Serves the versions `_scan` loaded and stops serving those it dropped."""
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
