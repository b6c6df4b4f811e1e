"""What the server counts, in Prometheus' text format at GET /monitoring/prometheus/metrics,
with TF Serving's metric names where it has the metric (its `/` spelt `:` as its Prometheus
endpoint writes them):

  :tensorflow:serving:request_count{model_name, status}                  counter
  :tensorflow:serving:request_latency{model_name, API, entrypoint}       histogram, us
  :tensorflow:serving:batching_session:queuing_latency{thread_pool_name} histogram, us
  :nmt_tf:serving:batch_size{model_name}                                 histogram, rows

`status` is the gRPC code name of the answer ("OK", "INVALID_ARGUMENT", "NOT_FOUND", ...;
REST answers counted by the code of their HTTP status, errors.CODE_NAMES); `API` is
Predict, GetModelMetadata or GetModelStatus, `entrypoint` REST or GRPC. A request naming no
served model is counted under model_name "", so that clients cannot grow the label set. The bucket bounds are TF
Serving's (request latency: 10 us x 1.8^k, 33 buckets; queuing: 100 us x 1.2^k, 52).
"""

import bisect
import math
import threading

def exponential(scale, growth, count):
  """TF Serving's monitoring::Buckets::Exponential bounds: scale * growth^k, k < count."""
  return [scale * growth ** k for k in range(count)]


class _Family:
  """One metric: its name, help, type and label names, and a value per label set."""

  def __init__(self, name, help_text, kind, labels, bounds=None):
    self.name, self.help, self.kind, self.labels = name, help_text, kind, tuple(labels)
    self.bounds = bounds
    self.values = {}  # label values -> a count, or a histogram's state (add)

  def add(self, labels, value=1.0):
    if self.kind == "counter":
      self.values[labels] = self.values.get(labels, 0.0) + value
      return
    # A count per bucket (the last above every bound), then the sum and the count.
    state = self.values.setdefault(labels, [0] * (len(self.bounds) + 1) + [0.0, 0])
    state[bisect.bisect_left(self.bounds, value)] += 1
    state[-2] += value
    state[-1] += 1

  def lines(self):
    yield f"# HELP {self.name} {self.help}"
    yield f"# TYPE {self.name} {self.kind}"
    for labels, state in sorted(self.values.items()):
      pairs = list(zip(self.labels, labels))
      if self.kind == "counter":
        yield f"{self.name}{_labels(pairs)} {_number(state)}"
        continue
      cumulative = 0
      for bound, count in zip(self.bounds + [math.inf], state[:-2]):
        cumulative += count
        le = "+Inf" if bound == math.inf else _number(bound)
        yield f"{self.name}_bucket{_labels(pairs + [('le', le)])} {cumulative}"
      yield f"{self.name}_sum{_labels(pairs)} {_number(state[-2])}"
      yield f"{self.name}_count{_labels(pairs)} {state[-1]}"


class Metrics:
  """The server's counters and histograms; every method may be called from any thread."""

  def __init__(self, max_batch_size=64):
    self._lock = threading.Lock()
    self.request_count = _Family(
        ":tensorflow:serving:request_count", "The total number of requests.", "counter",
        ("model_name", "status"))
    self.request_latency = _Family(
        ":tensorflow:serving:request_latency",
        "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
        "histogram", ("model_name", "API", "entrypoint"), exponential(10, 1.8, 33))
    self.queuing_latency = _Family(
        ":tensorflow:serving:batching_session:queuing_latency",
        "Distribution of wall time spent (in microseconds) in queuing", "histogram",
        ("thread_pool_name",), exponential(100, 1.2, 52))
    sizes = [2 ** k for k in range(max(1, max_batch_size).bit_length())]
    if sizes[-1] < max_batch_size:
      sizes.append(max_batch_size)
    self.batch_size = _Family(
        ":nmt_tf:serving:batch_size", "Rows of each batch run by the model.", "histogram",
        ("model_name",), sizes)

  def request(self, model_name, api, entrypoint, status, seconds):
    """Counts one answered request: `status` a gRPC code name, `seconds` its wall time."""
    with self._lock:
      self.request_count.add((model_name, status))
      self.request_latency.add((model_name, api, entrypoint), seconds * 1e6)

  def batch(self, model_name, rows, waits):
    """Counts one batch of `rows` rows whose requests waited `waits` seconds each."""
    with self._lock:
      self.batch_size.add((model_name,), rows)
      for wait in waits:
        self.queuing_latency.add(("model",), wait * 1e6)

  def text(self):
    """All metrics in Prometheus' text exposition format (version 0.0.4)."""
    with self._lock:
      families = (self.request_count, self.request_latency, self.queuing_latency,
                  self.batch_size)
      return "\n".join(line for family in families for line in family.lines()) + "\n"


def _labels(pairs):
  """{name="value",...} of (name, value) pairs, each value escaped as the text format says."""
  def escaped(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
  return "{" + ",".join(f'{k}="{escaped(v)}"' for k, v in pairs) + "}"


def _number(value):
  if float(value).is_integer():
    return str(int(value))
  return repr(float(value))
