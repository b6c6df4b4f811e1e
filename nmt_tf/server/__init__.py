"""`nmt-tf serve`: a local model server with TF Serving's REST API and an attention page.

  rest.py      the JSON of TF Serving's REST API: requests to tensors, tensors to answers
  servable.py  the signatures served: a SavedModel export's, or a run's model in-process
  batching.py  concurrent requests grouped into one call of a signature
  app.py       the ASGI application (Starlette): routes, limits, errors, the static page
  static/      the page at `/` (HTML, CSS and JavaScript, no build step, no CDN)
"""
