"""The refusal of a request, shared by the REST and gRPC APIs."""


class RequestError(Exception):
  """A request the server refuses with a one-line message: `status` is the HTTP status of the
  REST answer (400, 404, 413); the gRPC API answers the matching code (grpc_api.CODES)."""

  def __init__(self, message, status=400):
    super().__init__(message)
    self.status = status
