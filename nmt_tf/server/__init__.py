"""`nmt-tf serve`: a local model server with TF Serving's REST and gRPC APIs and an attention
page.

  servable.py  the signatures served: a SavedModel export's, or a run's model in-process
  batching.py  concurrent requests grouped into one call of a signature
  service.py   what both APIs answer: versions, limits, predict through the batcher, metadata
  errors.py    the refusal of a request (a status and one line)
  rest.py      the JSON of TF Serving's REST API: requests to tensors, tensors to answers
  app.py       the ASGI application (Starlette): routes, limits, errors, the static page
  grpc_api.py  TF Serving's PredictionService and ModelService over gRPC (--grpc_port)
  static/      the page at `/` (HTML, CSS and JavaScript, no build step, no CDN)
"""
