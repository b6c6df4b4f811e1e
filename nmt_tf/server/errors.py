"""The refusal of a request, shared by the REST and gRPC APIs."""

# The gRPC status code (its name) of each HTTP status an answer may have: what the gRPC API
# answers for a RequestError, and how the metrics count every answer.
CODE_NAMES = {200: "OK", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND",
              413: "RESOURCE_EXHAUSTED", 499: "CANCELLED"}


class RequestError(Exception):
  """A request the server refuses with a one-line message: `status` is the HTTP status of the
  REST answer (400, 404, 413); the gRPC API answers its code (CODE_NAMES)."""

  def __init__(self, message, status=400):
    super().__init__(message)
    self.status = status


def first_line(error):
  """The first line of `error`'s message (TensorFlow's errors: their `message`), at most 500
  characters; its type's name when it has none."""
  message = getattr(error, "message", None) or str(error) or type(error).__name__
  return " ".join(message.strip().splitlines()[:1])[:500]


def check_batch_sizes(columns):
  """RequestError unless every input of `columns` ({name: values}) has as many rows."""
  sizes = {name: len(values) for name, values in columns.items()}
  if len(set(sizes.values())) > 1:
    raise RequestError(f"The inputs have different batch sizes {sizes}; send one value of each "
                       "input per row.")
