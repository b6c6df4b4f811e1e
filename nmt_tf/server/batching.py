"""Requests of concurrent clients grouped into one call of a signature, as TF Serving's
batching does (`--enable_batching`: `max_batch_size`, `batch_timeout_micros`).

The first request for a signature opens a batch; the requests for the same signature that
wait in the queue (those that came while the model ran the batch before) and those that
arrive within `timeout` seconds join it while its rows stay within `max_rows`; then the
batch runs once, in the one thread that runs the model, and each request gets its own rows back, cut as
the call with its rows alone would answer (servable.rows_of). A batch that fails is run again
request by request, so that one bad request fails alone.
"""

import asyncio
import concurrent.futures

import numpy as np

from nmt_tf.server.servable import rows_of


class Batcher:
  """Groups the calls of `signature(inputs)` arriving together (module docstring).

  Args:
    max_rows: most rows in one call; a request of more is refused before it gets here.
    timeout: seconds a batch waits for more requests after its first.
  """

  def __init__(self, max_rows=64, timeout=0.002, observe=None):
    self.max_rows = max_rows
    self.timeout = timeout
    self.observe = observe  # observe(key, rows, [seconds each request waited]) per batch
    self._queues = {}
    self._model_thread = concurrent.futures.ThreadPoolExecutor(1, "nmt-tf-model")

  async def run(self, key, signature, inputs):
    """The outputs of `signature` for `inputs` ({name: numpy [rows]}), batched with other
    requests of the same `key` (a version and signature)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    queue = self._queues.get(key)
    if queue is None:
      queue = self._queues[key] = asyncio.Queue()
      loop.create_task(self._serve(queue))
    await queue.put((inputs, future, signature, key, loop.time()))
    return await future

  async def in_model_thread(self, function, *args):
    """function(*args), run in the model's thread (between batches)."""
    return await asyncio.get_running_loop().run_in_executor(self._model_thread, function, *args)

  async def _serve(self, queue):
    pending = None
    while True:
      batch, pending = await self._collect(queue, pending)
      await self._run_batch(batch)
      del batch  # nothing of a batch, its signature included, outlives it

  async def _collect(self, queue, pending):
    """(batch, the request that opens the next batch or None): `pending` or the next request,
    then those queued while the model was busy and those arriving within the timeout."""
    loop = asyncio.get_running_loop()
    first = pending or await queue.get()
    batch, rows = [first], _rows(first[0])
    deadline = loop.time() + self.timeout
    while rows < self.max_rows:
      if not queue.empty():  # requests that came while the model was busy
        item = queue.get_nowait()
      else:
        remaining = deadline - loop.time()
        if remaining <= 0:
          break
        try:
          item = await asyncio.wait_for(queue.get(), remaining)
        except asyncio.TimeoutError:
          break
      if rows + _rows(item[0]) > self.max_rows:
        return batch, item
      batch.append(item)
      rows += _rows(item[0])
    return batch, None

  async def _run_batch(self, batch):
    """Runs the requests of `batch` still waiting, in the model's thread, and answers each."""
    signature, key = batch[0][2:4]  # the requests carry it: a key no longer used holds none
    live = [(inputs, future) for inputs, future, *_ in batch if not future.done()]
    if not live:
      return
    if self.observe is not None:
      now = asyncio.get_running_loop().time()
      self.observe(key, sum(_rows(inputs) for inputs, _ in live),
                   [now - item[4] for item in batch if not item[1].done()])
    results = await self.in_model_thread(_call, signature, live)
    for (_, future), result in zip(live, results):
      if not future.done():  # the client may have gone
        if isinstance(result, BaseException):
          future.set_exception(result)
        else:
          future.set_result(result)


def _rows(inputs):
  return len(next(iter(inputs.values())))


def _call(signature, batch):
  """[outputs or exception] of each (inputs, future) of `batch`, from one call of `signature`
  (or one call each, when the joint call fails)."""
  if len(batch) > 1:
    joined = {name: np.concatenate([inputs[name] for inputs, _ in batch])
              for name in batch[0][0]}
    try:
      outputs = signature(joined)
    except Exception:  # pylint: disable=broad-exception-caught
      pass  # one request may be at fault: run each alone
    else:
      results, start = [], 0
      for inputs, _ in batch:
        stop = start + _rows(inputs)
        results.append(rows_of(outputs, start, stop))
        start = stop
      return results
  results = []
  for inputs, _ in batch:
    try:
      outputs = signature(inputs)
      results.append(rows_of(outputs, 0, _rows(inputs)))
    except Exception as error:  # pylint: disable=broad-exception-caught
      results.append(error)
  return results
