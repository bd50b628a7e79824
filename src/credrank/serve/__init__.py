"""``credrank serve``: the HTTP service (FastAPI on uvicorn; the ``serve`` extra)."""
